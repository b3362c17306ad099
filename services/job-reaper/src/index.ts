export { jobReaperService } from "./service.js";
export { jobReaperSettings } from "./settings.js";

export { jobReaperService } from "./service.js";
export { type JobReaperConfig, jobReaperSettings } from "./settings.js";

export { jobReaperService } from "./service.js";

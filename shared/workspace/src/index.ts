export {
  MAX_HOST_LENGTH,
  MAX_PATH_LENGTH,
  normaliseHost,
  normalisePath,
  pathHasPrefix,
} from "./resolution-input.js";

export {
  type BackendHostSettings,
  type Config,
  ConfigError,
  defaults,
  DEVELOPMENT_API_KEY,
  DEVELOPMENT_JWT_SIGNING_KEY,
  getConfig,
  loadConfigOrExit,
  LogLevel,
  NodeEnv,
  parseConfig,
  resetConfigCache,
} from "./config.js";
export {
  buildSettingTree,
  getSetting,
  getSettingArray,
  type SettingTree,
  type SettingValue,
} from "./settings-tree.js";

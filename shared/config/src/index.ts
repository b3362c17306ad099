export {
  type BackendHostSettings,
  type Config,
  ConfigError,
  defaults,
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

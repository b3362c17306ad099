export {
  type BackendHostOf,
  type BackendHostSettings,
  type Config,
  ConfigError,
  type ConfigOf,
  configOf,
  DEVELOPMENT_API_KEY,
  DEVELOPMENT_JWT_SIGNING_KEY,
  DEVELOPMENT_SECRETS_KEY,
  loadConfigOrExit,
  LogLevel,
  NodeEnv,
  parseConfig,
  type ParseOptions,
  platformSettings,
  settingsToParse,
} from "./config.js";
export { type Env, Reader, urlCheck } from "./reader.js";
export {
  buildSettingTree,
  getSetting,
  getSettingArray,
  type SettingTree,
  type SettingValue,
} from "./settings-tree.js";
export {
  type AnySettingsDeclaration,
  changeable,
  defineSettings,
  describeSettings,
  setting,
  type SettingDef,
  type SettingRow,
  type SettingsDeclaration,
  type SettingsOf,
  type SettingTable,
  variableOf,
} from "./table.js";

// Type-aware linting (typescript-eslint) with sorted imports; formatting is Prettier's (see .prettierrc.json).
import js from "@eslint/js";
import simpleImportSort from "eslint-plugin-simple-import-sort";
import tseslint from "typescript-eslint";

export default tseslint.config(
  {
    ignores: [
      "**/node_modules/**",
      "**/dist/**",
      ".dev/**",
      ".api-build/**",
      "docs/sdk/**",
      "deploy/**",
      "scripts/build.mjs",
      "scripts/build-cli.mjs",
      "scripts/build-admin.mjs",
      "services/gateway/static/admin/assets/**",
      // Reproductions against libraries the project does not depend on (ADR 0002): run in a scratch folder.
      "scripts/repro/**",
    ],
  },
  js.configs.recommended,
  ...tseslint.configs.recommendedTypeChecked,
  {
    languageOptions: { parserOptions: { projectService: true, tsconfigRootDir: import.meta.dirname } },
    plugins: { "simple-import-sort": simpleImportSort },
    rules: {
      "simple-import-sort/imports": "error",
      "simple-import-sort/exports": "error",
      "@typescript-eslint/consistent-type-imports": ["error", { fixStyle: "inline-type-imports" }],
      "@typescript-eslint/switch-exhaustiveness-check": "error",
      "@typescript-eslint/no-floating-promises": "error",
      "@typescript-eslint/only-throw-error": "error",
      "no-console": ["error", { allow: ["error", "warn"] }],
      // Fastify plugins and handlers are async by convention even when they await nothing.
      "@typescript-eslint/require-await": "off",
      // Settings and job payloads are merged into shared interfaces by `interface X extends Y {}`.
      "@typescript-eslint/no-empty-object-type": ["error", { allowInterfaces: "with-single-extends" }],
    },
  },
  {
    files: ["scripts/**", "bench/**", "test/**", "**/*.test.ts"],
    rules: {
      "no-console": "off",
      "@typescript-eslint/no-unsafe-assignment": "off",
      "@typescript-eslint/no-unsafe-member-access": "off",
      "@typescript-eslint/no-unsafe-argument": "off",
      "@typescript-eslint/no-unsafe-call": "off",
      "@typescript-eslint/no-unsafe-return": "off",
    },
  },
  {
    files: [
      "eslint.config.js",
      "**/bin/*.mjs",
      "examples/**/*.mjs",
      "examples/**/*.js",
      "services/*/src/**/*.mjs",
      "shared/*/src/**/*.mjs",
      "services/*/static/**/*.js",
    ],
    ...tseslint.configs.disableTypeChecked,
  },
);

#!/usr/bin/env node
// Runs the CLI from the repository's TypeScript source (the container image carries a bundled copy,
// dist/svc-plugin.mjs).
import { register } from "tsx/esm/api";

register();
await import("../src/main.ts");

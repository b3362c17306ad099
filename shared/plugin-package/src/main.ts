/** The CLI as a process (bundled into the image as dist/svc-plugin.mjs). */
import { main } from "./cli.js";

process.exitCode = await main(process.argv.slice(2));

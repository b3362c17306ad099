/** Header names used on the wire: the wire contract's (docs/wire-contract.md, @svc/wire-contract). */
export { Header } from "@svc/wire-contract";

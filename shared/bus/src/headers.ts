/** Header names used on the wire. They are part of the contract documented in docs/wire-contract.md. */
export const Header = {
  /** Correlates a request across services and logs. */
  RequestId: "Svc-Request-Id",
  /** Absolute deadline of the request, epoch milliseconds. Handlers may skip work past it. */
  Deadline: "Svc-Deadline",
  /** Present on error replies only: the stable error code; the body is the problem document. */
  ErrorCode: "Svc-Error-Code",
  /** Workspace key of an event (null-workspace events omit it). */
  WorkspaceKey: "Svc-Workspace-Key",
  /** When the event happened (ISO 8601); defaults to when it was published. */
  OccurredAt: "Svc-Occurred-At",
  /** How many flows led to this event (set by a flow's actions; flows stop at a limit). */
  FlowDepth: "Svc-Flow-Depth",
  /** JetStream de-duplication id of a published event. */
  MsgId: "Nats-Msg-Id",
} as const;

// The OTLP/HTTP export of a process's spans, in a worker thread of its own (docs/adr/0017-tracing.md).
// The process serialises each batch (protobuf, or JSON when asked) and hands the bytes over; this thread
// sends them with OpenTelemetry's own HTTP export (its retries, backoff, timeout and headers), so that the
// process's isolate never runs an HTTP client: its server code (Node's streams, sockets and outgoing
// messages) then stays specialised to the server's own objects. Sent from the process's isolate, one
// export every few thousand requests left that code polymorphic for good, which cost the gateway's cached
// route about 10 % of its instructions per request (docs/architecture.md, "Tracing").
//
// workerData: { url, headers, contentType }. Messages in: { id, bytes, spans } (an export) or
// { id, shutdown: true }; out: { id, code, error? } (code 0: sent; 1: failed, the SDK's ExportResultCode).
import { parentPort, workerData } from "node:worker_threads";

import { OTLPExporterBase } from "@opentelemetry/otlp-exporter-base";
import {
  convertLegacyHttpOptions,
  createOtlpHttpExportDelegate,
} from "@opentelemetry/otlp-exporter-base/node-http";
import { JsonTraceSerializer, ProtobufTraceSerializer } from "@opentelemetry/otlp-transformer";

const { url, headers, contentType } = workerData;
const answers = contentType === "application/json" ? JsonTraceSerializer : ProtobufTraceSerializer;

/** The request is serialised already: its bytes go out as they are. */
const serializer = {
  serializeRequest: (request) => request.bytes,
  deserializeResponse: (data) => answers.deserializeResponse(data),
};

const exporter = new OTLPExporterBase(
  createOtlpHttpExportDelegate(
    convertLegacyHttpOptions({ url, headers }, "TRACES", "v1/traces", { "Content-Type": contentType }),
    serializer,
    "otlp_http_span_exporter",
    { name: "span", countItems: (request) => request.spans },
    undefined,
  ),
);

parentPort.on("message", (message) => {
  if (message.shutdown) {
    exporter.shutdown().then(
      () => parentPort.postMessage({ id: message.id, code: 0 }),
      (error) => parentPort.postMessage({ id: message.id, code: 1, error: String(error?.message ?? error) }),
    );
    return;
  }
  exporter.export({ bytes: message.bytes, spans: message.spans }, (result) =>
    parentPort.postMessage({
      id: message.id,
      code: result.code,
      ...(result.error ? { error: String(result.error.message ?? result.error) } : {}),
    }),
  );
});

import * as sdk from "@opentelemetry/sdk-trace";
import { AlwaysOffSampler, ParentBasedSampler, TraceIdRatioBasedSampler } from "@opentelemetry/sdk-trace";
import { describe, expect, it } from "vitest";

import {
  batchOptions,
  currentTraceContext,
  parseOtelList,
  samplerFrom,
  tracesEndpoint,
  tracesProtocol,
} from "./tracing.js";

describe("tracing's configuration from the OTEL_* variables", () => {
  it("turns on only with an endpoint, the traces URL winning over the base URL", () => {
    expect(tracesEndpoint({})).toBeUndefined();
    expect(tracesEndpoint({ OTEL_EXPORTER_OTLP_ENDPOINT: "http://c:4318/" })).toBe("http://c:4318/v1/traces");
    expect(
      tracesEndpoint({
        OTEL_EXPORTER_OTLP_ENDPOINT: "http://c:4318",
        OTEL_EXPORTER_OTLP_TRACES_ENDPOINT: "http://t:4318/custom",
      }),
    ).toBe("http://t:4318/custom");
    expect(
      tracesEndpoint({ OTEL_EXPORTER_OTLP_ENDPOINT: "http://c:4318", OTEL_SDK_DISABLED: "true" }),
    ).toBeUndefined();
    expect(
      tracesEndpoint({ OTEL_EXPORTER_OTLP_ENDPOINT: "http://c:4318", OTEL_TRACES_EXPORTER: "none" }),
    ).toBeUndefined();
  });

  it("exports protobuf unless JSON is named, the traces' own protocol first", () => {
    expect(tracesProtocol({})).toBe("http/protobuf");
    expect(tracesProtocol({ OTEL_EXPORTER_OTLP_PROTOCOL: "http/json" })).toBe("http/json");
    expect(
      tracesProtocol({
        OTEL_EXPORTER_OTLP_PROTOCOL: "http/json",
        OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: "http/protobuf",
      }),
    ).toBe("http/protobuf");
  });

  it("reads the sampler and its ratio, a ratio out of [0, 1] falling back to 1", () => {
    expect(samplerFrom({ OTEL_TRACES_SAMPLER: "always_off" }, sdk)).toBeInstanceOf(AlwaysOffSampler);
    const ratio = samplerFrom({ OTEL_TRACES_SAMPLER: "traceidratio", OTEL_TRACES_SAMPLER_ARG: "0.1" }, sdk);
    expect(ratio).toBeInstanceOf(TraceIdRatioBasedSampler);
    expect(ratio.toString()).toContain("0.1");
    expect(
      samplerFrom({ OTEL_TRACES_SAMPLER: "traceidratio", OTEL_TRACES_SAMPLER_ARG: "7" }, sdk).toString(),
    ).toContain("{1}");
    expect(samplerFrom({}, sdk)).toBeInstanceOf(ParentBasedSampler);
    expect(samplerFrom({ OTEL_TRACES_SAMPLER: "parentbased_traceidratio" }, sdk)).toBeInstanceOf(
      ParentBasedSampler,
    );
  });

  it("reads the batch processor's OTEL_BSP_* settings, ignoring what is not a whole number above 0", () => {
    expect(batchOptions({})).toEqual({});
    expect(
      batchOptions({
        OTEL_BSP_MAX_EXPORT_BATCH_SIZE: "64",
        OTEL_BSP_SCHEDULE_DELAY: "250",
        OTEL_BSP_MAX_QUEUE_SIZE: "-1",
        OTEL_BSP_EXPORT_TIMEOUT: "1.5",
      }),
    ).toEqual({ maxExportBatchSize: 64, scheduledDelayMillis: 250 });
    expect(batchOptions({ OTEL_BSP_MAX_QUEUE_SIZE: " ", OTEL_BSP_EXPORT_TIMEOUT: "30000" })).toEqual({
      exportTimeoutMillis: 30_000,
    });
  });

  it("parses `key=value,…` lists, URL-decoding the values and skipping malformed parts", () => {
    expect(parseOtelList("a=1, b=x%20y,=bad,noequals,c=%zz")).toEqual({ a: "1", b: "x y", c: "%zz" });
    expect(parseOtelList(undefined)).toEqual({});
  });

  it("carries no context while tracing is off", () => {
    expect(currentTraceContext()).toBeNull();
  });
});

// OTEL_BSP_* are read by our code since SDK 3.x stopped reading them: the tests' short
// batches (OTEL_BSP_SCHEDULE_DELAY) and operators' tuning depend on this parse.
import test from "ava";
import { batchOptions } from "./sdk";

test("tracing sdk - OTEL_BSP_* unset or empty give the spec's defaults", (t) => {
  const defaults = {
    scheduledDelayMillis: 5000,
    exportTimeoutMillis: 30000,
    maxQueueSize: 2048,
    maxExportBatchSize: 512,
  };
  t.deepEqual(batchOptions({}), defaults);
  t.deepEqual(batchOptions({ OTEL_BSP_SCHEDULE_DELAY: "", OTEL_BSP_MAX_QUEUE_SIZE: "" }), defaults);
});

test("tracing sdk - OTEL_BSP_* set are what the batch processor gets", (t) => {
  t.deepEqual(
    batchOptions({
      OTEL_BSP_SCHEDULE_DELAY: "100",
      OTEL_BSP_EXPORT_TIMEOUT: "2000",
      OTEL_BSP_MAX_QUEUE_SIZE: "64",
      OTEL_BSP_MAX_EXPORT_BATCH_SIZE: "16",
    }),
    { scheduledDelayMillis: 100, exportTimeoutMillis: 2000, maxQueueSize: 64, maxExportBatchSize: 16 },
  );
});

test("tracing sdk - a bad OTEL_BSP_* value falls back to its default, as the spec says", (t) => {
  const got = batchOptions({ OTEL_BSP_SCHEDULE_DELAY: "soon", OTEL_BSP_MAX_QUEUE_SIZE: "0" });
  t.is(got.scheduledDelayMillis, 5000);
  t.is(got.maxQueueSize, 2048);
});

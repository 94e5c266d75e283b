// Validates Prometheus Operator objects against their CRD schemas (the models' compiled JSON
// schemas): a JSON array of objects on standard input, one line of JSON out per object. An object
// of a kind with no schema here is a failure, never skipped.
import { PodMonitor } from "@kubernetes-models/prometheus-operator/monitoring.coreos.com/v1/PodMonitor";
import { PrometheusRule } from "@kubernetes-models/prometheus-operator/monitoring.coreos.com/v1/PrometheusRule";
import { ServiceMonitor } from "@kubernetes-models/prometheus-operator/monitoring.coreos.com/v1/ServiceMonitor";
import { readFileSync } from "node:fs";

const MODELS = {
  "monitoring.coreos.com/v1/PodMonitor": PodMonitor,
  "monitoring.coreos.com/v1/PrometheusRule": PrometheusRule,
  "monitoring.coreos.com/v1/ServiceMonitor": ServiceMonitor,
};

let failed = 0;
for (const object of JSON.parse(readFileSync(0, "utf8"))) {
  const key = `${object.apiVersion}/${object.kind}`;
  const Model = MODELS[key];
  let error = null;
  if (!Model) {
    error = `no schema for ${key}`;
  } else {
    try {
      new Model(object).validate();
    } catch (e) {
      error = e.message;
    }
  }
  failed += error ? 1 : 0;
  console.log(JSON.stringify({ kind: key, name: object.metadata?.name, error }));
}
process.exit(failed ? 1 : 0);

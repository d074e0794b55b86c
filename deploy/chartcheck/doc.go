// Package chartcheck renders the Helm chart (deploy/helm/mooncake) with helm's own Go engine
// and validates every object it renders with kubeconform (github.com/yannh/kubeconform, as a
// library, strict) against the Kubernetes JSON schemas, and the ServiceMonitor against the
// Prometheus Operator's CRD schema; it also decodes every core object strictly into its
// k8s.io/api type, which parses the quantities the schemas leave as strings. It then checks
// what no schema can: the masters' --peers are the DNS names their StatefulSet gives its
// pods, workers reach those names, and the probes, disruption budgets and huge pages are there.
//
// The schemas are made in the test from upstream sources fetched as Go modules (kubeschema_test.go):
// kubeconform's default location, GitHub, is out of reach here, and the module proxy is not.
//
// It is a module of its own so that helm and client-go (about two minutes of compiling on
// two cores) stay out of the store's module graph and its default test run: run it with
// `make chart-check` (docs/deploy.md).
package chartcheck

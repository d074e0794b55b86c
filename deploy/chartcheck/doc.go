// Package chartcheck renders the Helm chart (deploy/helm/mooncake) with helm's own Go engine
// and validates every object it renders against the Kubernetes API types (k8s.io/api, decoded
// strictly: an unknown or misspelt field, a wrong type or a bad quantity fails), and checks
// what the types cannot: the masters' --peers are the DNS names their StatefulSet gives its
// pods, workers reach those names, and the probes, disruption budgets and huge pages are there.
//
// It is a module of its own so that helm and client-go (about two minutes of compiling on
// two cores) stay out of the store's module graph and its default test run: run it with
// `make chart-check` (docs/deploy.md).
package chartcheck

{{/* The chart's names. Every object is named <fullname>-<component>. */}}
{{- define "mooncake.fullname" -}}
{{- if contains "mooncake" .Release.Name -}}
{{- .Release.Name | trunc 40 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-mooncake" .Release.Name | trunc 40 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- define "mooncake.labels" -}}
app.kubernetes.io/name: mooncake
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{- define "mooncake.selector" -}}
app.kubernetes.io/name: mooncake
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "mooncake.image" -}}
{{ .Values.image.repository }}:{{ .Values.image.tag }}
{{- end -}}

{{/* The masters' headless Service: the StatefulSet's serviceName, which gives each master
     the stable DNS name its raft peers use. */}}
{{- define "mooncake.masterService" -}}
{{ include "mooncake.fullname" . }}-master
{{- end -}}

{{/* masterHost i: the stable DNS name of master i (the StatefulSet's pod i). */}}
{{- define "mooncake.masterHost" -}}
{{- $ := index . 0 -}}
{{- printf "%s-%d.%s.%s.svc.%s" (include "mooncake.masterService" $) (index . 1) (include "mooncake.masterService" $) $.Release.Namespace $.Values.clusterDomain -}}
{{- end -}}

{{/* peers: --peers, id=raft host:port for every master; the ids are the pod names. */}}
{{- define "mooncake.peers" -}}
{{- $peers := list -}}
{{- range $i := until (int .Values.master.replicas) -}}
{{- $peers = append $peers (printf "%s-%d=%s:%d" (include "mooncake.masterService" $) $i (include "mooncake.masterHost" (list $ $i)) (int $.Values.master.raftPort)) -}}
{{- end -}}
{{- join "," $peers -}}
{{- end -}}

{{/* masterAddresses: every master's client RPC address, for workers and clients. */}}
{{- define "mooncake.masterAddresses" -}}
{{- $addrs := list -}}
{{- range $i := until (int .Values.master.replicas) -}}
{{- $addrs = append $addrs (printf "%s:%d" (include "mooncake.masterHost" (list $ $i)) (int $.Values.master.rpcPort)) -}}
{{- end -}}
{{- join "," $addrs -}}
{{- end -}}

{{/* antiAffinity component mode: hard (required) or soft (preferred) spreading over nodes. */}}
{{- define "mooncake.antiAffinity" -}}
{{- $ := index . 0 -}}
{{- $component := index . 1 -}}
{{- $mode := index . 2 -}}
{{- $term := dict "topologyKey" "kubernetes.io/hostname" "labelSelector" (dict "matchLabels" (dict "app.kubernetes.io/name" "mooncake" "app.kubernetes.io/instance" $.Release.Name "app.kubernetes.io/component" $component)) -}}
podAntiAffinity:
{{- if eq $mode "hard" }}
  requiredDuringSchedulingIgnoredDuringExecution:
    - {{ toJson $term }}
{{- else }}
  preferredDuringSchedulingIgnoredDuringExecution:
    - weight: 100
      podAffinityTerm: {{ toJson $term }}
{{- end }}
{{- end -}}

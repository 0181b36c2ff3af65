{{/* Names, labels and pod pieces every template shares. */}}

{{- define "taskline.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "taskline.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "taskline.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* Labels of every object; (list $ "component") adds the component. */}}
{{- define "taskline.labels" -}}
{{- $ := index . 0 -}}
helm.sh/chart: {{ include "taskline.chart" $ }}
app.kubernetes.io/name: {{ include "taskline.name" $ }}
app.kubernetes.io/instance: {{ $.Release.Name }}
app.kubernetes.io/version: {{ $.Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ $.Release.Service }}
app.kubernetes.io/part-of: taskline
{{- if gt (len .) 1 }}
app.kubernetes.io/component: {{ index . 1 }}
{{- end }}
{{- with $.Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{/* Selector labels: (list $ "component"). */}}
{{- define "taskline.selectorLabels" -}}
{{- $ := index . 0 -}}
app.kubernetes.io/name: {{ include "taskline.name" $ }}
app.kubernetes.io/instance: {{ $.Release.Name }}
{{- if gt (len .) 1 }}
app.kubernetes.io/component: {{ index . 1 }}
{{- end }}
{{- end -}}

{{- define "taskline.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "taskline.fullname" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{/* Image reference: (list $ component-values "component"); a digest pins it. */}}
{{- define "taskline.image" -}}
{{- $ := index . 0 -}}
{{- $img := (index . 1).image -}}
{{- $repo := $img.repository | default (printf "%s/%s" $.Values.image.registry (index . 2)) -}}
{{- $tag := $img.tag | default $.Values.image.tag | default $.Chart.AppVersion -}}
{{- if $img.digest -}}
{{- printf "%s:%s@%s" $repo $tag $img.digest -}}
{{- else -}}
{{- printf "%s:%s" $repo $tag -}}
{{- end -}}
{{- end -}}

{{- define "taskline.redisSecretName" -}}
{{- if .Values.redis.bundled.enabled -}}
{{- .Values.redis.bundled.existingSecret | default (printf "%s-redis" (include "taskline.fullname" .)) -}}
{{- else -}}
{{- .Values.redis.existingSecret | default (printf "%s-redis" (include "taskline.fullname" .)) -}}
{{- end -}}
{{- end -}}

{{/* The in-chart cluster's pods, host:port by their stable names under the headless Service. */}}
{{- define "taskline.redisClusterNodes" -}}
{{- $name := printf "%s-redis" (include "taskline.fullname" .) -}}
{{- $nodes := list -}}
{{- range $i := until 6 -}}
{{- $nodes = append $nodes (printf "%s-%d.%s.%s.svc:6379" $name $i $name $.Release.Namespace) -}}
{{- end -}}
{{- join "," $nodes -}}
{{- end -}}

{{/* REDIS_URL (or the cluster's seed nodes) and the durability setting, from the bundled Redis's password or the external URL's Secret. */}}
{{- define "taskline.redisEnv" -}}
{{- if .Values.redis.bundled.enabled }}
- name: REDIS_PASSWORD
  valueFrom: { secretKeyRef: { name: {{ include "taskline.redisSecretName" . }}, key: password } }
{{- if eq .Values.redis.bundled.mode "cluster" }}
# Every pod is a seed; the client learns the rest of the cluster from whichever answers.
- name: TASKLINE_REDIS_CLUSTER_NODES
  value: {{ include "taskline.redisClusterNodes" . | quote }}
- name: TASKLINE_REDIS_PASSWORD
  value: $(REDIS_PASSWORD)
{{- else }}
- name: REDIS_URL
  value: redis://:$(REDIS_PASSWORD)@{{ include "taskline.fullname" . }}-redis:6379
{{- end }}
{{- else }}
- name: REDIS_URL
  valueFrom:
    secretKeyRef:
      name: {{ include "taskline.redisSecretName" . }}
      key: {{ ternary .Values.redis.existingSecretKey "url" (ne .Values.redis.existingSecret "") }}
{{- end }}
- name: TASKLINE_DURABILITY
  value: {{ .Values.redis.durability | quote }}
{{- end -}}

{{/* What every Taskline container reads: the shared ConfigMap and the keys' Secret. */}}
{{- define "taskline.envFrom" -}}
- configMapRef:
    name: {{ include "taskline.fullname" . }}
- secretRef:
    name: {{ ternary (include "taskline.fullname" .) .Values.secrets.existingSecret .Values.secrets.create }}
{{- end -}}

{{/* Restart pods when their settings or keys change (helm upgrade after a key rotation). */}}
{{- define "taskline.checksums" -}}
checksum/config: {{ include (print .Template.BasePath "/config.yaml") . | sha256sum }}
checksum/secrets: {{ include (print .Template.BasePath "/secrets.yaml") . | sha256sum }}
{{- end -}}

{{/* Pod metadata: (list $ component-values "component"). */}}
{{- define "taskline.podMetadata" -}}
{{- $ := index . 0 -}}
{{- $c := index . 1 -}}
metadata:
  labels:
    {{- include "taskline.labels" (list $ (index . 2)) | nindent 4 }}
  annotations:
    {{- include "taskline.checksums" $ | nindent 4 }}
    {{- with $.Values.podAnnotations }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
    {{- with $c.podAnnotations }}
    {{- toYaml . | nindent 4 }}
    {{- end }}
{{- end -}}

{{/* Pod-level settings every component shares: (list $ component-values). */}}
{{- define "taskline.podCommon" -}}
{{- $ := index . 0 -}}
{{- $c := index . 1 -}}
serviceAccountName: {{ include "taskline.serviceAccountName" $ }}
# No Taskline service talks to the Kubernetes API.
automountServiceAccountToken: false
{{- with $.Values.imagePullSecrets }}
imagePullSecrets:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with $c.priorityClassName }}
priorityClassName: {{ . }}
{{- end }}
{{- with $c.runtimeClassName }}
runtimeClassName: {{ . }}
{{- end }}
{{- with $c.nodeSelector }}
nodeSelector:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with $c.tolerations }}
tolerations:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- with $c.topologySpreadConstraints }}
topologySpreadConstraints:
  {{- toYaml . | nindent 2 }}
{{- end }}
{{- end -}}

{{- define "taskline.containerSecurity" -}}
securityContext:
  allowPrivilegeEscalation: false
  readOnlyRootFilesystem: true
  capabilities: { drop: [ALL] }
{{- end -}}

{{/*
The KEDA query of one pool: (list $ models-matcher), scoped to the release's namespace and the
pool's models: tasks waiting, as the current leader exports them (a scheduler that lost leadership
keeps its last gauge), plus busy worker slots. Each side is 0 when it has no series, so the sum
exists with no workers (scale from zero) and with an empty queue (running tasks keep their
workers). promtool tests it (test/deploy/keda.test.ts).
*/}}
{{- define "taskline.kedaQuery" -}}
{{- $ := index . 0 -}}
{{- $.Files.Get "files/keda-query.promql" | replace "NAMESPACE" $.Release.Namespace | replace "MODELS" (index . 1) | trim -}}
{{- end -}}

{{/*
The KEDA models matcher of a tool pool: its tools' queues (model `tool:<name>`), names quoted as
regular expressions inside a PromQL raw string (backticks), where `\.` needs no second escape.
*/}}
{{- define "taskline.toolModels" -}}
{{- $names := list -}}
{{- range . -}}
{{- $names = append $names (regexQuoteMeta .) -}}
{{- end -}}
{{- printf "model=~`tool:(%s)`" (join "|" $names) -}}
{{- end -}}

{{/*
A tool pool's settings: (list $ pool result-dict). toolWorkerDefaults, each key the pool gives
replacing it (autoscaling and pdb key by key). Keys are copied with `set`, not merged: sprig's
`merge` (and `mergeOverwrite` in older Helm releases) counts false and 0 as unset, so a pool's
`autoscaling.enabled: false` or `replicas: 0` would lose, depending on the user's Helm.
*/}}
{{- define "taskline.toolPool" -}}
{{- $ := index . 0 -}}
{{- $c := index . 2 -}}
{{- range $k, $v := deepCopy $.Values.toolWorkerDefaults -}}
{{- $_ := set $c $k $v -}}
{{- end -}}
{{- range $k, $v := index . 1 -}}
{{- if has $k (list "autoscaling" "pdb") -}}
{{- range $k2, $v2 := $v -}}
{{- $_ := set (index $c $k) $k2 $v2 -}}
{{- end -}}
{{- else -}}
{{- $_ := set $c $k $v -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/*
`affinity:` of a pod: (list $ affinity avoid-gpu-nodes). Avoiding GPU nodes adds
`<gpuNodeLabel.key> NotIn [<gpuNodeLabel.value>]`, which nodes without the label meet too, to every
required node selector term of the affinity given: terms are ORed, so one without it would let the
pod onto a GPU node. With no term given it is the only one. The rest of the affinity is kept.
*/}}
{{- define "taskline.affinity" -}}
{{- $ := index . 0 -}}
{{- $affinity := deepCopy (index . 1 | default dict) -}}
{{- if index . 2 -}}
{{- $avoid := dict "key" $.Values.gpuNodeLabel.key "operator" "NotIn" "values" (list $.Values.gpuNodeLabel.value) -}}
{{- $node := $affinity.nodeAffinity | default dict -}}
{{- $required := $node.requiredDuringSchedulingIgnoredDuringExecution | default dict -}}
{{- $terms := list -}}
{{- range $required.nodeSelectorTerms | default (list dict) -}}
{{- $terms = append $terms (set . "matchExpressions" (append (.matchExpressions | default list) $avoid)) -}}
{{- end -}}
{{- $_ := set $required "nodeSelectorTerms" $terms -}}
{{- $_ = set $node "requiredDuringSchedulingIgnoredDuringExecution" $required -}}
{{- $_ = set $affinity "nodeAffinity" $node -}}
{{- end -}}
{{- with $affinity -}}
affinity:
  {{- toYaml . | nindent 2 }}
{{- end -}}
{{- end -}}

{{/* Preferred spread of a component's pods over nodes: (list $ "component"). */}}
{{- define "taskline.preferOtherNodes" -}}
podAntiAffinity:
  preferredDuringSchedulingIgnoredDuringExecution:
    - weight: 100
      podAffinityTerm:
        topologyKey: kubernetes.io/hostname
        labelSelector:
          matchLabels:
            {{- include "taskline.selectorLabels" . | nindent 12 }}
{{- end -}}

{{/*
The control plane's settings of a container: (list $ "scheduler"|"worker"). Both read the token;
the scheduler serves its certificate, a worker checks it against the CA. The scheduler gets no CA:
with one it would require client certificates, and workers authenticate by the token.
*/}}
{{- define "taskline.controlEnv" -}}
{{- $ := index . 0 -}}
{{- $cp := $.Values.controlPlane }}
{{- $fullname := include "taskline.fullname" $ }}
- name: TASKLINE_CONTROL_TOKEN
  valueFrom: { secretKeyRef: { name: {{ $cp.existingTokenSecret | default (printf "%s-control" $fullname) }}, key: token } }
{{- if not $cp.tls.enabled }}
- { name: TASKLINE_CONTROL_PLAINTEXT, value: 'true' }
{{- else if eq (index . 1) "scheduler" }}
- { name: TASKLINE_CONTROL_TLS_CERT, value: /etc/taskline/control-tls/tls.crt }
- { name: TASKLINE_CONTROL_TLS_KEY, value: /etc/taskline/control-tls/tls.key }
{{- else }}
- { name: TASKLINE_CONTROL_TLS_CA, value: /etc/taskline/control-tls/ca.crt }
# Workers dial pod IPs (a standby's redirect): they check the certificate's name, not the address.
- { name: TASKLINE_CONTROL_TLS_SERVER_NAME, value: {{ printf "%s-scheduler" $fullname | quote }} }
{{- end }}
{{- end -}}

{{/* The control plane's certificates, mounted where taskline.controlEnv points: (list $ "scheduler"|"worker"). */}}
{{- define "taskline.controlTlsVolume" -}}
{{- $ := index . 0 -}}
{{- $cp := $.Values.controlPlane }}
{{- if $cp.tls.enabled }}
- name: control-tls
  secret:
    secretName: {{ $cp.tls.existingSecret | default (printf "%s-control" (include "taskline.fullname" $)) }}
    items:
      {{- if eq (index . 1) "scheduler" }}
      - { key: tls.crt, path: tls.crt }
      - { key: tls.key, path: tls.key }
      {{- else }}
      - { key: ca.crt, path: ca.crt }
      {{- end }}
{{- end }}
{{- end -}}

{{- define "taskline.controlTlsMount" -}}
{{- if .Values.controlPlane.tls.enabled }}
- { name: control-tls, mountPath: /etc/taskline/control-tls, readOnly: true }
{{- end }}
{{- end -}}

{{/*
Names are tessera's (tessera, tessera-node-agent, ...), not the release's: the
objects are the kustomize manifests' (one tessera per cluster: two would serve
the same device-plugin sockets on each node), and the alerting rules name the
Service tessera-exporter as their job. fullnameOverride replaces the
"tessera" every object's name starts with (the rules' job follows);
nameOverride the app.kubernetes.io/name label's.
*/}}
{{- define "tessera.fullname" -}}
{{- .Values.fullnameOverride | default "tessera" -}}
{{- end -}}

{{- define "tessera.name" -}}
{{- .Values.nameOverride | default "tessera" -}}
{{- end -}}

{{/* The namespace of every namespaced object. */}}
{{- define "tessera.namespace" -}}
{{- .Values.namespace.name | default .Release.Namespace -}}
{{- end -}}

{{/* The labels Helm's conventions add to every object (none selects on them). */}}
{{- define "tessera.helmLabels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/instance: {{ .Release.Name | trunc 63 | trimSuffix "-" }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
{{- end -}}

{{/* What selects the pods: the DaemonSet's selector and the Service's. */}}
{{- define "tessera.selectorLabels" -}}
app.kubernetes.io/name: {{ include "tessera.name" . }}
{{- end -}}

{{/* The labels of the objects the kustomize manifests label app.kubernetes.io/name: tessera. */}}
{{- define "tessera.labels" -}}
{{ include "tessera.selectorLabels" . }}
{{ include "tessera.helmLabels" . }}
{{- end -}}

{{- define "tessera.image" -}}
{{- printf "%s:%s" .Values.image.repository (toString (.Values.image.tag | default .Chart.AppVersion)) -}}
{{- end -}}

{{/* The driver from the host (driver.source host): no NVIDIA runtime on the node. */}}
{{- define "tessera.hostDriver" -}}
{{- if eq (toString .Values.driver.source) "host" }}true{{ end -}}
{{- end -}}

{{/* CDI specs written: cdi.enabled, or implied by driver.source host (nothing else hands workloads their devices). */}}
{{- define "tessera.cdi" -}}
{{- if or .Values.cdi.enabled (include "tessera.hostDriver" .) }}true{{ end -}}
{{- end -}}

{{/*
The pod's runtimeClassName line, if any: the value, else nvidia where the
toolkit's runtime gives the driver (node mode and the DRA driver with
driver.source runtime; list: [node-or-dra]).
*/}}
{{- define "tessera.runtimeClass" -}}
{{- $nodeOrDra := index . 1 -}}
{{- with index . 0 -}}
{{- if kindIs "invalid" .Values.runtimeClassName -}}
{{- if and $nodeOrDra (not (include "tessera.hostDriver" .)) -}}
runtimeClassName: nvidia
{{- end -}}
{{- else if .Values.runtimeClassName -}}
runtimeClassName: {{ .Values.runtimeClassName }}
{{- end -}}
{{- end -}}
{{- end -}}

{{/*
What a container that calls NVML gets beside its own env: with driver.source
host the driver's NVML under /driver-root; then extraEnv. Rendered as list
items at the container's env indentation (nindent by the caller).
*/}}
{{- define "tessera.driverEnv" -}}
{{- if include "tessera.hostDriver" . }}
# No NVIDIA runtime (driver.source host): NVML from the driver root.
- name: TESSERA_NVML_LIBRARY
  value: {{ printf "/driver-root%s/libnvidia-ml.so.1" (trimSuffix "/" (toString .Values.driver.libraryDir)) | quote }}
{{- end }}
{{- with .Values.extraEnv }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{/*
The mounts a container that calls NVML gets beside its own: the driver root
read-only at /driver-root where the second item is true, then
extraVolumeMounts. List items (nindent by the caller).
*/}}
{{- define "tessera.driverMounts" -}}
{{- if index . 1 }}
# HostToContainer: a driver root mounted on the host after this pod started
# (the GPU Operator's driver container) shows here too.
- {name: driver-root, mountPath: /driver-root, readOnly: true, mountPropagation: HostToContainer}
{{- with include "tessera.devRootMount" (index . 0) }}
- {name: dev-root, mountPath: {{ . | quote }}, readOnly: true, mountPropagation: HostToContainer}
{{- end }}
{{- end }}
{{- with (index . 0).Values.extraVolumeMounts }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{/*
driver.devRoot where it is neither the driver root nor / (a directory the
containers do not otherwise see): mounted read-only at its own path, where
--dev-root makes tessera look. Empty otherwise.
*/}}
{{- define "tessera.devRootMount" -}}
{{- $dev := toString .Values.driver.devRoot -}}
{{- if and $dev (ne $dev "/") (ne $dev (toString .Values.driver.root)) }}{{ $dev }}{{ end -}}
{{- end -}}

{{/* --dev-root where driver.devRoot differs from the driver root (a JSON list). */}}
{{- define "tessera.devRootArgs" -}}
{{- $dev := toString .Values.driver.devRoot -}}
{{- if and $dev (ne $dev (toString .Values.driver.root)) }}{{ toJson (list "--dev-root" $dev) }}{{ else }}[]{{ end -}}
{{- end -}}

{{/*
The driver root's volumes (the second item true: the driver root is mounted):
the root (made if missing, for a driver container that mounts it later) and
a separate dev root. List items (nindent by the caller).
*/}}
{{- define "tessera.driverVolumes" -}}
{{- if index . 1 }}
{{- $ := index . 0 }}
- name: driver-root
  hostPath:
    path: {{ $.Values.driver.root | toString | quote }}
    type: DirectoryOrCreate
{{- with include "tessera.devRootMount" $ }}
- name: dev-root
  hostPath:
    path: {{ . | quote }}
    type: Directory
{{- end }}
{{- end }}
{{- end -}}

{{/*
wait-for-driver (the second item true: the driver root is mounted, and
driver.wait): an init container that holds the pod until the driver root has
NVML, as NVIDIA's plugins wait for the GPU Operator's driver container,
saying every minute what it waits for. List item (nindent by the caller).
*/}}
{{- define "tessera.waitForDriver" -}}
{{- $ := index . 0 }}
{{- if and (index . 1) $.Values.driver.wait }}
{{- $lib := printf "%s/libnvidia-ml.so.1" (trimSuffix "/" (toString $.Values.driver.libraryDir)) }}
- name: wait-for-driver
  image: {{ include "tessera.image" $ }}
  imagePullPolicy: {{ $.Values.image.pullPolicy }}
  command:
  - sh
  - -c
  - |
    lib=/driver-root{{ $lib }}
    n=0
    until [ -e "$lib" ]; do
      if [ $((n % 12)) -eq 0 ]; then
        echo "wait-for-driver: no {{ $lib }} under the driver root {{ $.Values.driver.root }} on the host yet: waiting for the driver (the GPU Operator's driver container installs it there; otherwise set driver.root and driver.libraryDir to where the driver is, or driver.wait=false)" >&2
      fi
      n=$((n + 1))
      sleep 5
    done
    echo "wait-for-driver: the driver is there: {{ $.Values.driver.root }}{{ $lib }}"
  securityContext:
    allowPrivilegeEscalation: false
    capabilities:
      drop: ["ALL"]
  volumeMounts:
  - {name: driver-root, mountPath: /driver-root, readOnly: true, mountPropagation: HostToContainer}
{{- end }}
{{- end -}}

{{/* The host-driver securityContext (driver.source host): the device nodes need it. */}}
{{- define "tessera.hostDriverSecurityContext" -}}
# No NVIDIA runtime grants the /dev/nvidia* nodes (driver.source host): privileged.
privileged: true
{{- end -}}

{{- define "tessera.node" -}}
{{- if eq .Values.mode "node" }}true{{ end -}}
{{- end -}}

{{/* A config value: the file's text as given, a map as YAML, empty as the default file. */}}
{{- define "tessera.configText" -}}
{{- $value := index . 0 -}}
{{- if kindIs "string" $value -}}
{{- $value -}}
{{- else if $value -}}
{{- toYaml $value -}}
{{- end -}}
{{- end -}}

{{/* The device-plugin config as written (before the cdi rewrite): the user's or the default file. */}}
{{- define "tessera.devicePluginConfigSource" -}}
{{- $user := include "tessera.configText" (list .Values.devicePluginConfig) -}}
{{- if $user -}}
{{- $user -}}
{{- else if .Values.mps.enabled -}}
{{- .Files.Get "files/device-plugin-config-mps.yaml" -}}
{{- else if and (include "tessera.node" .) (or .Values.migManager.enabled .Values.migMonitor.enabled) -}}
{{- .Files.Get "files/device-plugin-config-mig.yaml" -}}
{{- else -}}
{{- .Files.Get "files/device-plugin-config.yaml" -}}
{{- end -}}
{{- end -}}

{{/* The device-plugin config parsed, failing on one that is not a YAML map. */}}
{{- define "tessera.parse" -}}
{{- $what := index . 0 -}}
{{- $parsed := fromYaml (index . 1) -}}
{{- if hasKey $parsed "Error" -}}
{{- fail (printf "%s is not a YAML map: %s" $what (get $parsed "Error")) -}}
{{- end -}}
{{- toJson $parsed -}}
{{- end -}}

{{/*
The device-plugin config the ConfigMap carries. With cdi.enabled,
flags.plugin.deviceListStrategy becomes [cdi-cri] unless the user's own config
sets one: the config is then parsed and written again (its comments lost).
*/}}
{{- define "tessera.devicePluginConfig" -}}
{{- $text := include "tessera.devicePluginConfigSource" . -}}
{{- if include "tessera.cdi" . -}}
{{- $config := include "tessera.parse" (list "devicePluginConfig" $text) | fromJson -}}
{{- $flags := get $config "flags" | default dict -}}
{{- $plugin := get $flags "plugin" | default dict -}}
{{- $own := include "tessera.configText" (list .Values.devicePluginConfig) -}}
{{- if not (and $own (hasKey $plugin "deviceListStrategy")) -}}
{{- $_ := set $plugin "deviceListStrategy" (list "cdi-cri") -}}
{{- $_ := set $flags "plugin" $plugin -}}
{{- $_ := set $config "flags" $flags -}}
{{- $text = printf "# %s, with flags.plugin.deviceListStrategy [cdi-cri] (cdi.enabled).\n%s" (ternary "Your devicePluginConfig" "The chart's default device-plugin config" (not (empty $own))) (toYaml $config) -}}
{{- end -}}
{{- end -}}
{{- $text -}}
{{- end -}}

{{/* The mig-parted config the ConfigMap carries. */}}
{{- define "tessera.migConfig" -}}
{{- include "tessera.configText" (list .Values.migConfig) | default (.Files.Get "files/mig-config.yaml") -}}
{{- end -}}

{{/* The MPS root: the device-plugin config's flags.mpsRoot (tessera's default /run/nvidia/mps). */}}
{{- define "tessera.mpsRoot" -}}
{{- $config := include "tessera.parse" (list "devicePluginConfig" (include "tessera.devicePluginConfigSource" .)) | fromJson -}}
{{- (get $config "flags" | default dict).mpsRoot | default "/run/nvidia/mps" -}}
{{- end -}}

{{/*
The extended resources that are tessera shares, as JSON: admission.shareResources,
or unset the names the device-plugin config's sharing advertises, as tessera
reads it (src/sharing/resources.cpp): sharing.mps's resources if it has any,
else sharing.timeSlicing's; each name and rename under nvidia.com/ (NVIDIA's
NewResourceName), advertised as its rename, else name.shared with
renameByDefault, else its name. None for the DRA driver (no device-plugin
config: its shares are claims, admission.resourceClaims).
*/}}
{{- define "tessera.shareResources" -}}
{{- $names := list -}}
{{- if not (kindIs "invalid" .Values.admission.shareResources) -}}
{{- range .Values.admission.shareResources }}{{ $names = append $names (toString .) }}{{ end -}}
{{- else if not .Values.dra.enabled -}}
{{- $config := include "tessera.parse" (list "devicePluginConfig" (include "tessera.devicePluginConfigSource" .)) | fromJson -}}
{{- $sharing := get $config "sharing" | default dict -}}
{{- $spec := get $sharing "mps" | default dict -}}
{{- if not (get $spec "resources") }}{{ $spec = get $sharing "timeSlicing" | default dict }}{{ end -}}
{{- range (get $spec "resources" | default list) -}}
{{- $name := toString .name -}}
{{- if .rename }}{{ $name = toString .rename }}{{ end -}}
{{- if not (hasPrefix "nvidia.com/" $name) }}{{ $name = printf "nvidia.com/%s" $name }}{{ end -}}
{{- if and (not .rename) (get $spec "renameByDefault") }}{{ $name = printf "%s.shared" $name }}{{ end -}}
{{- $names = append $names $name -}}
{{- end -}}
{{- end -}}
{{- toJson (uniq $names) -}}
{{- end -}}

{{/* Pods with resource claims hold shares: admission.resourceClaims, or unset the DRA driver's memory shares. */}}
{{- define "tessera.shareClaims" -}}
{{- if kindIs "invalid" .Values.admission.resourceClaims -}}
{{- if and .Values.dra.enabled (or .Values.dra.memoryShares (and .Values.dra.consumableShares (ne (toString .Values.dra.consumableShares) "disabled"))) }}true{{ end -}}
{{- else if .Values.admission.resourceClaims }}true{{ end -}}
{{- end -}}

{{/* The share-isolation policy is rendered: admission.enabled, and something is a share. */}}
{{- define "tessera.admission" -}}
{{- if and .Values.admission.enabled (or (include "tessera.shareResources" . | fromJsonArray) (include "tessera.shareClaims" .)) }}true{{ end -}}
{{- end -}}

{{/* What the values may not combine to; rendered (as nothing) by the DaemonSet. */}}
{{- define "tessera.validate" -}}
{{- if not (has .Values.mode (list "plugin" "node")) -}}
{{- fail (printf "mode %q: plugin or node" (toString .Values.mode)) -}}
{{- end -}}
{{- if .Values.dra.enabled -}}
{{- /* Before the mode checks: with dra, what runs is neither mode's. */ -}}
{{- if not (semverCompare ">=1.34.0-0" .Capabilities.KubeVersion.Version) -}}
{{- fail (printf "dra.enabled needs Kubernetes 1.34 or newer (resource.k8s.io/v1 DeviceClasses and ResourceSlices), not %s" .Capabilities.KubeVersion.Version) -}}
{{- end -}}
{{- if .Values.migManager.enabled -}}
{{- fail "dra.enabled with migManager.enabled: the DRA driver cuts each claim's MIG instance itself, and a MIG manager would change the layout under it" -}}
{{- end -}}
{{- if .Values.migMonitor.enabled -}}
{{- fail "dra.enabled with migMonitor.enabled: MIG monitoring is the node agent's, which the DRA driver replaces (it serves MIG instances it did not cut as they are)" -}}
{{- end -}}
{{- if .Values.metrics.enabled -}}
{{- fail "dra.enabled with metrics.enabled: the chart runs no exporter beside the DRA driver (deploy/overlays/dra has none)" -}}
{{- end -}}
{{- if include "tessera.configText" (list .Values.devicePluginConfig) -}}
{{- fail "dra.enabled with a devicePluginConfig: the DRA driver reads none (claims carry their configs, NVIDIA's GpuConfig and MigDeviceConfig)" -}}
{{- end -}}
{{- if include "tessera.configText" (list .Values.migConfig) -}}
{{- fail "dra.enabled with a migConfig: the DRA driver reads none (it cuts the MIG devices the scheduler allocates)" -}}
{{- end -}}
{{- end -}}
{{- with .Values.devicePluginConfigs -}}
{{- if and .default (not .name) -}}
{{- fail "devicePluginConfigs.default names a config of devicePluginConfigs.name, which is not set" -}}
{{- end -}}
{{- if and .deviceListStrategy (not .name) -}}
{{- fail "devicePluginConfigs.deviceListStrategy applies to the configs of devicePluginConfigs.name, which is not set (a devicePluginConfig sets its own)" -}}
{{- end -}}
{{- end -}}
{{- if .Values.devicePluginConfigs.name -}}
{{- if .Values.dra.enabled -}}
{{- fail "dra.enabled with devicePluginConfigs: the DRA driver reads no device-plugin config (claims carry their configs)" -}}
{{- end -}}
{{- if not (include "tessera.node" .) -}}
{{- fail "devicePluginConfigs needs mode=node: the node agent reads the Node's nvidia.com/device-plugin.config label, the plugin mode's device plugin does not" -}}
{{- end -}}
{{- if include "tessera.configText" (list .Values.devicePluginConfig) -}}
{{- fail "devicePluginConfigs and devicePluginConfig both give the device-plugin config: give one" -}}
{{- end -}}
{{- if and .Values.admission.enabled (kindIs "invalid" .Values.admission.shareResources) -}}
{{- fail (printf "devicePluginConfigs: the chart cannot read ConfigMap %q to know which resources its configs share; set admission.shareResources to them ([] when none), or admission.enabled=false" .Values.devicePluginConfigs.name) -}}
{{- end -}}
{{- end -}}
{{- if and (not (include "tessera.node" .)) (or .Values.migManager.enabled .Values.migMonitor.enabled) -}}
{{- fail "migManager and migMonitor are options of mode node (in plugin mode the mig-apply init container applies migApply.configName)" -}}
{{- end -}}
{{- $config := include "tessera.parse" (list "devicePluginConfig" (include "tessera.devicePluginConfigSource" .)) | fromJson -}}
{{- $sharesMps := hasKey (get $config "sharing" | default dict) "mps" -}}
{{- /* The DRA driver's MPS claims carry their own sharing config (deploy/components/dra-mps). */ -}}
{{- if and .Values.mps.enabled (not $sharesMps) (not .Values.dra.enabled) -}}
{{- fail "mps.enabled, but the device-plugin config has no sharing.mps: nothing would use tessera-mps-host's daemons" -}}
{{- end -}}
{{- if and $sharesMps (not .Values.mps.enabled) -}}
{{- fail "the device-plugin config has sharing.mps: set mps.enabled=true (tessera-mps-host runs the daemons, with the host's IPC namespace and the mpsRoot host path)" -}}
{{- end -}}
{{- $mpsRoot := include "tessera.mpsRoot" . -}}
{{- if and .Values.mps.enabled (not (isAbs $mpsRoot)) -}}
{{- fail (printf "the device-plugin config's flags.mpsRoot %q is not an absolute path" $mpsRoot) -}}
{{- end -}}
{{- if and (or (include "tessera.cdi" .) .Values.dra.enabled) (not (isAbs (toString .Values.cdi.specDir))) -}}
{{- fail (printf "cdi.specDir %q is not an absolute path" (toString .Values.cdi.specDir)) -}}
{{- end -}}
{{- if not (has (toString .Values.driver.source) (list "runtime" "host")) -}}
{{- fail (printf "driver.source %q: runtime (the NVIDIA container toolkit's runtime gives the driver) or host (no NVIDIA runtime: the driver's files from driver.root)" (toString .Values.driver.source)) -}}
{{- end -}}
{{- range $k := list "root" "libraryDir" "binDir" -}}
{{- if not (isAbs (toString (get $.Values.driver $k))) -}}
{{- fail (printf "driver.%s %q is not an absolute path" $k (toString (get $.Values.driver $k))) -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* The pod's tolerations: the value, else the mode's default (the DRA driver's: node mode's). */}}
{{- define "tessera.tolerations" -}}
{{- if kindIs "invalid" .Values.tolerations -}}
- key: nvidia.com/gpu
  operator: Exists
  effect: NoSchedule
{{- if or (include "tessera.node" .) .Values.dra.enabled }}
- key: CriticalAddonsOnly
  operator: Exists
{{- end }}
{{- else if .Values.tolerations -}}
{{ toYaml .Values.tolerations }}
{{- end -}}
{{- end -}}

{{/* The tessera container's resources: the value, else the mode's default. */}}
{{- define "tessera.resources" -}}
{{- if not (kindIs "invalid" .Values.resources) -}}
{{- toYaml .Values.resources -}}
{{- else if and (include "tessera.node" .) .Values.metrics.enabled -}}
{{- /* The agent's own budget plus the plugin-mode exporter's, and some CPU for sampling. */ -}}
requests: {cpu: 70m, memory: 96Mi}
limits: {memory: 352Mi}
{{- else -}}
requests: {cpu: 50m, memory: 64Mi}
limits: {memory: 256Mi}
{{- end -}}
{{- end -}}

{{/*
The options every tessera container gets from the values: CDI (the specs'
hooks: the linker cache and libcuda.so; the memory quota's driver backend),
then extraArgs.
*/}}
{{- define "tessera.extraArgs" -}}
{{- $args := list -}}
{{- if include "tessera.cdi" . -}}
{{- $args = concat $args (list "--cdi-spec-dir" (toString .Values.cdi.specDir) "--driver-root" (toString .Values.driver.root) "--container-driver-root" "/driver-root" "--cdi-hook" "/var/lib/tessera/lib/tessera-cdi-hook" "--memory-hook" "/var/lib/tessera/lib/tessera-memory-hook") -}}
{{- $args = concat $args (include "tessera.devRootArgs" . | fromJsonArray) -}}
{{- end -}}
{{- range .Values.extraArgs -}}
{{- $args = append $args (toString .) -}}
{{- end -}}
{{- toJson $args -}}
{{- end -}}

{{/*
The DRA driver's options beyond deploy/overlays/dra's: the dra values that
differ from `tessera dra`'s defaults, CDI's driver root, then extraArgs
(--cdi-spec-dir is always on its command: DRA hands devices only by CDI).
*/}}
{{- define "tessera.draArgs" -}}
{{- $args := list -}}
{{- if ne (toString .Values.dra.driverName) "gpu.nvidia.com" -}}
{{- $args = concat $args (list "--driver-name" (toString .Values.dra.driverName)) -}}
{{- end -}}
{{- if ne (toString .Values.dra.order) "tessera" -}}
{{- $args = concat $args (list "--order" (toString .Values.dra.order)) -}}
{{- end -}}
{{- if .Values.dra.memoryShares -}}
{{- $args = append $args "--memory-shares" -}}
{{- end -}}
{{- with .Values.dra.consumableShares -}}
{{- $args = concat $args (list "--consumable-shares" (toString .)) -}}
{{- end -}}
{{- if not .Values.dra.migModeSwitch -}}
{{- $args = append $args "--no-mig-mode-switch" -}}
{{- end -}}
{{- if include "tessera.cdi" . -}}
{{- $args = concat $args (list "--driver-root" (toString .Values.driver.root) "--container-driver-root" "/driver-root") -}}
{{- $args = concat $args (include "tessera.devRootArgs" . | fromJsonArray) -}}
{{- end -}}
{{- /* Time-slice intervals: the driver root's nvidia-smi (the NVIDIA runtime puts one on PATH). */ -}}
{{- if include "tessera.hostDriver" . -}}
{{- $args = concat $args (list "--nvidia-smi" (printf "/driver-root%s/nvidia-smi" (trimSuffix "/" (toString .Values.driver.binDir)))) -}}
{{- end -}}
{{- range .Values.extraArgs -}}
{{- $args = append $args (toString .) -}}
{{- end -}}
{{- toJson $args -}}
{{- end -}}

{{/*
The pods' securityContext: podSecurityContext, or unset (null) the runtime's
default seccomp profile, which every tessera container allows (a privileged
container runs unconfined whatever the pod says). {}: none.
*/}}
{{- define "tessera.podSecurityContext" -}}
{{- if kindIs "invalid" .Values.podSecurityContext -}}
seccompProfile:
  type: RuntimeDefault
{{- else if .Values.podSecurityContext -}}
{{ toYaml .Values.podSecurityContext }}
{{- end -}}
{{- end -}}

{{/*
The pods' affinity: the value, or unset (null) nodes with an NVIDIA PCI
device as node-feature-discovery labels them (vendor 10de), or with GFD's and
the GPU Operator's nvidia.com/gpu.present=true. {}: none.
*/}}
{{- define "tessera.affinity" -}}
{{- if kindIs "invalid" .Values.affinity -}}
nodeAffinity:
  requiredDuringSchedulingIgnoredDuringExecution:
    nodeSelectorTerms:
    - matchExpressions:
      - {key: feature.node.kubernetes.io/pci-0302_10de.present, operator: In, values: ["true"]}
    - matchExpressions:
      - {key: feature.node.kubernetes.io/pci-0300_10de.present, operator: In, values: ["true"]}
    - matchExpressions:
      - {key: feature.node.kubernetes.io/pci-10de.present, operator: In, values: ["true"]}
    - matchExpressions:
      - {key: nvidia.com/gpu.present, operator: In, values: ["true"]}
{{- else if .Values.affinity -}}
{{ toYaml .Values.affinity }}
{{- end -}}
{{- end -}}

{{/* Which nodes the pods go to, for NOTES.txt. */}}
{{- define "tessera.nodesNote" -}}
{{- $parts := list -}}
{{- if kindIs "invalid" .Values.affinity -}}
{{- $parts = append $parts "the nodes with an NVIDIA GPU by node-feature-discovery's labels (feature.node.kubernetes.io/pci-0302_10de.present or pci-0300_10de.present, or pci-10de.present where NFD labels by vendor only) or labelled nvidia.com/gpu.present=true" -}}
{{- else if .Values.affinity -}}
{{- $parts = append $parts "the nodes the affinity value allows" -}}
{{- else -}}
{{- $parts = append $parts "every node" -}}
{{- end -}}
{{- range $k, $v := .Values.nodeSelector -}}
{{- $parts = append $parts (printf "labelled %s=%s" $k $v) -}}
{{- end -}}
{{- join ", " $parts -}}
{{- end -}}

{{- /*
dict "root" $ "file" NAME "from" PATH "replace" (list OLD NEW ...): files/NAME, the kustomize
manifests' own deploy/PATH copied byte for byte (check_helm.sh), read as it is with each OLD
replaced by the NEW after it, one document per object with the chart's labels added.
*/}}
{{- define "tessera.manifestFile" -}}
{{- $text := .root.Files.Get (printf "files/%s" .file) -}}
{{- $pairs := .replace -}}
{{- range $i, $old := $pairs -}}
{{- if eq (mod $i 2) 0 }}{{ $text = replace $old (index $pairs (add1 $i)) $text }}{{ end -}}
{{- end -}}
{{- $root := .root -}}
{{- $from := .from -}}
{{- $file := .file -}}
{{- range $part := splitList "\n---\n" $text }}
{{- $doc := fromYaml $part }}
{{- if or (hasKey $doc "Error") (not (hasKey $doc "kind")) }}{{ fail (printf "files/%s is not deploy/%s" $file $from) }}{{ end }}
{{- $_ := set $doc.metadata "labels" (merge (include "tessera.helmLabels" $root | fromYaml) ($doc.metadata.labels | default dict)) }}
---
{{ toYaml $doc }}
{{- end }}
{{- end -}}

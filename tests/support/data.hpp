// The data files the tests read, all inside the source tree: NVIDIA's and
// ParvaGPU's files kept verbatim under third_party/, the project's own under
// data/ (see each folder's README for where each came from).
#pragma once

#include <string>

namespace tessera::testing {

inline const std::string kSourceDir = TESSERA_SOURCE_DIR;
// NVIDIA mig-parted's default named configs (deployments/systemd/config-default.yaml).
inline const std::string kNvidiaMigDefaults = kSourceDir + "/third_party/nvidia-mig-parted/config-default.yaml";
// The same configs inside the GPU Operator's ConfigMap (assets/state-mig-manager/0400_configmap.yaml).
inline const std::string kGpuOperatorConfigMap = kSourceDir + "/third_party/nvidia-gpu-operator/0400_configmap.yaml";
// The MIG reference table tools/gen_catalog.py generates the catalog from.
inline const std::string kMigProfiles = kSourceDir + "/data/mig-profiles.json";
// The 37-service workload of the planner's tests and benchmark.
inline const std::string kWorkload = kSourceDir + "/data/workloads/llm-mix-37.csv";

}  // namespace tessera::testing

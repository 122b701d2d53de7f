#!/bin/sh
# The real-cluster tier's stand-in for NVIDIA's nbody CUDA sample (/tmp/sample in
# nvcr.io/nvidia/k8s/cuda-sample:nbody-*; this is not NVIDIA's program). NVIDIA's
# quickstart runs it as `/tmp/sample --benchmark --numbodies=N`; the arguments are
# ignored. Under MPS (CUDA_MPS_PIPE_DIRECTORY set) it connects to the control daemon
# as the simulator's CUDA client, which prints the server and limits the daemon gives
# it and stays connected; otherwise it names the GPU device nodes it was given. Either
# way it runs until stopped.
if [ -n "${CUDA_MPS_PIPE_DIRECTORY:-}" ]; then
  exec /usr/local/bin/nvidia-cuda-mps-control --tessera-sim-client
fi
echo "tessera e2e nbody stand-in: GPU device nodes $(cd /dev && echo nvidia[0-9]*)"
exec sleep infinity

#!/bin/bash
# On the GPU machine: the stream-flag probe, with its own time limits.
cd "$(dirname "$0")"
O=${OUT:-/tmp/out}; mkdir -p "$O"
{
nvidia-smi --query-gpu=name,driver_version,compute_mode --format=csv
nvidia-smi topo -m 2>/dev/null | head -5
which nvidia-cuda-mps-control nvidia-cuda-mps-server 2>&1
for P in 2 4; do
  for b in 8 65536 16777216; do
    it=200; [ $b -ge 16777216 ] && it=40
    timeout 22 ./stream_flags_probe $P $b $it 2>&1
  done
done
if command -v nvidia-cuda-mps-control >/dev/null; then
  export CUDA_MPS_PIPE_DIRECTORY=/tmp/mps CUDA_MPS_LOG_DIRECTORY=/tmp/mpslog
  mkdir -p /tmp/mps /tmp/mpslog
  timeout 10 nvidia-cuda-mps-control -d && echo "MPS started"
  for P in 2 4; do timeout 22 ./stream_flags_probe $P 65536 200 2>&1 | sed 's/^/MPS /'; done
  echo quit | timeout 10 nvidia-cuda-mps-control
  cat /tmp/mpslog/control.log 2>/dev/null | tail -5
fi
} 2>&1 | tee "$O/probe.txt"

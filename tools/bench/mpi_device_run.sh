#!/bin/bash
# Device benchmark of data-parallel training (issue #31) on a GPU machine without MPI: copy this
# script into a folder with `distributed` (cargo build --release -p rumus --features mpi --example
# distributed; stripped) and `debs/` (`apt-get download` of openmpi-bin, libopenmpi3 and their
# runtime dependencies from `apt-cache depends --recurse`, about 22 MB), carried with `.gl` (the
# Vulkan loader) two levels up; it unpacks Open MPI there and runs 1 and 2 processes on the one
# GPU (both processes share it). SMOKE=1: a quick 2-rank synthetic run only.
set -u
cd "$(dirname "$0")"
HERE=$PWD
[ -d ../../.gl ] && { for f in ../../.gl/*.deb; do dpkg -x $f /; done; ldconfig; }
mkdir -p ompi && for f in debs/*.deb; do dpkg -x $f ompi; done
export OPAL_PREFIX=$HERE/ompi/usr
export PMIX_INSTALL_PREFIX=$HERE/ompi/usr/lib/x86_64-linux-gnu/pmix2
export PMIX_MCA_mca_base_component_path=$PMIX_INSTALL_PREFIX/lib/pmix
export OMPI_MCA_mca_base_component_path=$HERE/ompi/usr/lib/x86_64-linux-gnu/openmpi/lib/openmpi3
export PATH=$HERE/ompi/usr/bin:$PATH
export LD_LIBRARY_PATH=$HERE/ompi/usr/lib/x86_64-linux-gnu:$HERE/ompi/usr/lib/x86_64-linux-gnu/openmpi/lib:$HERE/ompi/lib/x86_64-linux-gnu:${LD_LIBRARY_PATH:-}
export OMPI_MCA_plm=isolated OMPI_MCA_btl_vader_single_copy_mechanism=none
export XDG_RUNTIME_DIR=/tmp/rumus-xdg; mkdir -p -m 0700 $XDG_RUNTIME_DIR
if ! ldconfig -p | grep -q libvulkan.so.1; then echo "no vulkan loader"; fi
export VK_DRIVER_FILES=${VK_DRIVER_FILES:-/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json}
[ -f "$VK_DRIVER_FILES" ] || unset VK_DRIVER_FILES
nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
ln -sf orterun ompi/usr/bin/mpirun; which mpirun && mpirun --version | head -1
chmod +x ./distributed
M="mpirun -x PMIX_INSTALL_PREFIX -x PMIX_MCA_mca_base_component_path -x OMPI_MCA_mca_base_component_path --oversubscribe --allow-run-as-root -x LD_LIBRARY_PATH -x OPAL_PREFIX -x XDG_RUNTIME_DIR -x RUMUS_DEVICE=wgpu"
[ -n "${VK_DRIVER_FILES:-}" ] && M="$M -x VK_DRIVER_FILES"
if [ -n "${SMOKE:-}" ]; then $M -np 2 ./distributed --synthetic 2>&1 | tail -3; exit; fi
for B in 64 256; do
  for NP in 1 2; do
    echo "== np=$NP batch/rank=$B"
    timeout 60 $M -np $NP ./distributed --random 16384 --batch-size $B --epochs 3 --steps 100 --bench 200 2>&1 | tr '\r' '\n' | grep -a "^rank\|Epoch 3\|rror\|MPI\|bort\|LeNet" | tail -8
  done
done

# Sourced by the GPU-machine scripts: installs the Vulkan loader carried in .gl/ when the machine
# has none, and points it at the NVIDIA driver's ICD.
if ! ldconfig -p | grep -q 'libvulkan.so.1'; then
  for package in .gl/*.deb; do dpkg -x "$package" /; done
  ldconfig
fi
nvidia_icd=/usr/local/nvidia/share/vulkan/icd.d/nvidia_icd.json
if [ -z "${VK_DRIVER_FILES:-}" ] && [ -f "$nvidia_icd" ]; then export VK_DRIVER_FILES="$nvidia_icd"; fi

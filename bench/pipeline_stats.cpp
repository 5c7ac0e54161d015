// What the Vulkan driver makes of a compute shader: registers, shared memory, binary size, as
// the driver reports them through VK_KHR_pipeline_executable_properties. Occupancy follows from
// them, and no profiler is at hand on the GPU machine.
//
//   pipeline_stats [--device SUBSTRING] [--no-robust-access] FILE.spirv...
//
// Each FILE is a SPIR-V module with one GLCompute entry point, as Dawn hands it to the driver:
// Mesa dumps those when MESA_SPIRV_DUMP_PATH names a folder (run a kernel on lavapipe with it
// set). Dawn's SPIR-V for another vendor may differ by its per-vendor workarounds. The pipeline
// layout is read from the module (every DescriptorSet / Binding decoration, a uniform or storage
// buffer by the variable's storage class). The device enables every feature it has, so
// robustBufferAccess as Dawn does by default; --no-robust-access leaves it off, as Dawn's
// disable_robustness (wgsl-forge --no-bounds-checks) does. Prints one JSON object per line:
//   {"file", "device", "executable", "subgroup_size", "statistics": {name: value}}
// Exit 1 on a file that cannot be read or parsed, 2 when no device supports the extension.
// Built by hand (g++ -std=c++20 -O2 bench/pipeline_stats.cpp -lvulkan), not by CMake: it needs
// the Vulkan headers, which the forge itself does not.

#include <vulkan/vulkan.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iterator>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace {

// A Vulkan structure, zeroed, of type `type`.
template <class Structure>
Structure make(VkStructureType type) {
  Structure value{};
  value.sType = type;
  return value;
}

[[noreturn]] void fail(int code, const std::string& why) {
  std::fprintf(stderr, "pipeline_stats: %s\n", why.c_str());
  std::exit(code);
}

void check(VkResult result, const char* what) {
  if (result != VK_SUCCESS)
    fail(2, std::string(what) + " failed: VkResult " + std::to_string(result));
}

// Vulkan's two-call enumeration: the count, then that many items of structure type `type`.
template <class Item, class Query, class Info>
std::vector<Item> query_all(Query query, VkDevice device, const Info* info, VkStructureType type,
                            const char* what) {
  std::uint32_t count = 0;
  check(query(device, info, &count, nullptr), what);
  std::vector<Item> items(count, make<Item>(type));
  check(query(device, info, &count, items.data()), what);
  items.resize(count);
  return items;
}

std::vector<std::uint32_t> read_words(const std::string& path) {
  std::ifstream file(path, std::ios::binary);
  if (!file) fail(1, path + ": cannot be read");
  std::vector<char> bytes((std::istreambuf_iterator<char>(file)), std::istreambuf_iterator<char>());
  if (bytes.size() < 20 || bytes.size() % 4 != 0) fail(1, path + ": not a SPIR-V module");
  std::vector<std::uint32_t> words(bytes.size() / 4);
  std::memcpy(words.data(), bytes.data(), bytes.size());
  if (words[0] != 0x07230203u) fail(1, path + ": no SPIR-V magic number");
  return words;
}

struct Module {
  std::string entry_point;
  // (set, binding) -> descriptor type
  std::map<std::pair<std::uint32_t, std::uint32_t>, VkDescriptorType> bindings;
};

// The entry point and the resource bindings, from the module's instructions.
Module parse(const std::string& path, const std::vector<std::uint32_t>& words) {
  constexpr std::uint32_t kOpEntryPoint = 15, kOpDecorate = 71, kOpVariable = 59;
  constexpr std::uint32_t kDecorationBinding = 33, kDecorationDescriptorSet = 34;
  constexpr std::uint32_t kStorageUniform = 2, kStorageStorageBuffer = 12;
  std::map<std::uint32_t, std::uint32_t> set_of, binding_of, storage_of;
  Module module;
  for (std::size_t at = 5; at < words.size();) {
    const std::uint32_t count = words[at] >> 16, opcode = words[at] & 0xffffu;
    if (count == 0 || at + count > words.size()) fail(1, path + ": truncated instruction");
    if (opcode == kOpEntryPoint && count > 3) {
      module.entry_point = reinterpret_cast<const char*>(&words[at + 3]);
    } else if (opcode == kOpDecorate && count == 4) {
      if (words[at + 2] == kDecorationDescriptorSet) set_of[words[at + 1]] = words[at + 3];
      if (words[at + 2] == kDecorationBinding) binding_of[words[at + 1]] = words[at + 3];
    } else if (opcode == kOpVariable && count >= 4) {
      storage_of[words[at + 2]] = words[at + 3];
    }
    at += count;
  }
  if (module.entry_point.empty()) fail(1, path + ": no entry point");
  for (const auto& [id, set] : set_of) {
    if (!binding_of.contains(id)) continue;
    const auto storage = storage_of.find(id);
    if (storage == storage_of.end()) fail(1, path + ": a decorated binding is no variable");
    VkDescriptorType type;
    if (storage->second == kStorageUniform) {
      type = VK_DESCRIPTOR_TYPE_UNIFORM_BUFFER;
    } else if (storage->second == kStorageStorageBuffer) {
      type = VK_DESCRIPTOR_TYPE_STORAGE_BUFFER;
    } else {
      fail(1, path + ": binding of storage class " + std::to_string(storage->second) +
                  " (only buffers are handled)");
    }
    module.bindings[{set, binding_of[id]}] = type;
  }
  return module;
}

std::string quoted(const std::string& text) {
  std::string out = "\"";
  for (const char c : text) {
    if (c == '"' || c == '\\') out += '\\';
    if (static_cast<unsigned char>(c) >= 0x20) out += c;
  }
  return out + "\"";
}

std::string value_text(const VkPipelineExecutableStatisticKHR& statistic) {
  switch (statistic.format) {
    case VK_PIPELINE_EXECUTABLE_STATISTIC_FORMAT_BOOL32_KHR:
      return statistic.value.b32 ? "true" : "false";
    case VK_PIPELINE_EXECUTABLE_STATISTIC_FORMAT_INT64_KHR:
      return std::to_string(statistic.value.i64);
    case VK_PIPELINE_EXECUTABLE_STATISTIC_FORMAT_UINT64_KHR:
      return std::to_string(statistic.value.u64);
    case VK_PIPELINE_EXECUTABLE_STATISTIC_FORMAT_FLOAT64_KHR:
      return std::to_string(statistic.value.f64);
    default:
      return "null";
  }
}

struct Gpu {
  VkInstance instance = VK_NULL_HANDLE;
  VkPhysicalDevice physical = VK_NULL_HANDLE;
  VkDevice device = VK_NULL_HANDLE;
  std::string name;
  PFN_vkGetPipelineExecutablePropertiesKHR executables = nullptr;
  PFN_vkGetPipelineExecutableStatisticsKHR statistics = nullptr;
};

bool has_extension(VkPhysicalDevice physical, const char* wanted) {
  std::uint32_t count = 0;
  vkEnumerateDeviceExtensionProperties(physical, nullptr, &count, nullptr);
  std::vector<VkExtensionProperties> extensions(count);
  vkEnumerateDeviceExtensionProperties(physical, nullptr, &count, extensions.data());
  for (const auto& extension : extensions) {
    if (std::string(extension.extensionName) == wanted) return true;
  }
  return false;
}

// The first device whose name contains `filter` and that reports pipeline statistics.
Gpu open_gpu(const std::string& filter, bool robust_access) {
  Gpu gpu;
  auto application = make<VkApplicationInfo>(VK_STRUCTURE_TYPE_APPLICATION_INFO);
  application.pApplicationName = "pipeline_stats";
  application.apiVersion = VK_API_VERSION_1_3;
  auto instance_info = make<VkInstanceCreateInfo>(VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO);
  instance_info.pApplicationInfo = &application;
  check(vkCreateInstance(&instance_info, nullptr, &gpu.instance), "vkCreateInstance");
  std::uint32_t count = 0;
  vkEnumeratePhysicalDevices(gpu.instance, &count, nullptr);
  std::vector<VkPhysicalDevice> physicals(count);
  vkEnumeratePhysicalDevices(gpu.instance, &count, physicals.data());
  const char* extension = VK_KHR_PIPELINE_EXECUTABLE_PROPERTIES_EXTENSION_NAME;
  for (const auto physical : physicals) {
    VkPhysicalDeviceProperties properties;
    vkGetPhysicalDeviceProperties(physical, &properties);
    const std::string name = properties.deviceName;
    // Vulkan 1.3 for shaderZeroInitializeWorkgroupMemory: Dawn's SPIR-V gives workgroup
    // variables null initializers where the device has it.
    if (name.find(filter) == std::string::npos || properties.apiVersion < VK_API_VERSION_1_3 ||
        !has_extension(physical, extension)) {
      continue;
    }
    gpu.physical = physical;
    gpu.name = name;
    break;
  }
  if (gpu.physical == VK_NULL_HANDLE)
    fail(2, "no Vulkan 1.3 device named *" + filter + "* has " + extension);

  std::uint32_t families = 0;
  vkGetPhysicalDeviceQueueFamilyProperties(gpu.physical, &families, nullptr);
  std::vector<VkQueueFamilyProperties> family_properties(families);
  vkGetPhysicalDeviceQueueFamilyProperties(gpu.physical, &families, family_properties.data());
  std::optional<std::uint32_t> compute_family;
  for (std::uint32_t f = 0; f < families && !compute_family; ++f) {
    if (family_properties[f].queueFlags & VK_QUEUE_COMPUTE_BIT) compute_family = f;
  }
  if (!compute_family) fail(2, gpu.name + " has no compute queue");
  const float priority = 1.0f;
  auto queue = make<VkDeviceQueueCreateInfo>(VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO);
  queue.queueFamilyIndex = *compute_family;
  queue.queueCount = 1;
  queue.pQueuePriorities = &priority;
  auto executable_info = make<VkPhysicalDevicePipelineExecutablePropertiesFeaturesKHR>(
      VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PIPELINE_EXECUTABLE_PROPERTIES_FEATURES_KHR);
  executable_info.pipelineExecutableInfo = VK_TRUE;
  auto features11 =
      make<VkPhysicalDeviceVulkan11Features>(VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_1_FEATURES);
  features11.pNext = &executable_info;
  auto features12 =
      make<VkPhysicalDeviceVulkan12Features>(VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES);
  features12.pNext = &features11;
  auto features13 =
      make<VkPhysicalDeviceVulkan13Features>(VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_3_FEATURES);
  features13.pNext = &features12;
  auto supported = make<VkPhysicalDeviceFeatures2>(VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2);
  supported.pNext = &features13;
  vkGetPhysicalDeviceFeatures2(gpu.physical, &supported);  // enable what the device has
  executable_info.pipelineExecutableInfo = VK_TRUE;
  supported.features.robustBufferAccess &= robust_access ? VK_TRUE : VK_FALSE;
  auto device_info = make<VkDeviceCreateInfo>(VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO);
  device_info.pNext = &supported;
  device_info.queueCreateInfoCount = 1;
  device_info.pQueueCreateInfos = &queue;
  device_info.enabledExtensionCount = 1;
  device_info.ppEnabledExtensionNames = &extension;
  check(vkCreateDevice(gpu.physical, &device_info, nullptr, &gpu.device), "vkCreateDevice");
  gpu.executables = reinterpret_cast<PFN_vkGetPipelineExecutablePropertiesKHR>(
      vkGetDeviceProcAddr(gpu.device, "vkGetPipelineExecutablePropertiesKHR"));
  gpu.statistics = reinterpret_cast<PFN_vkGetPipelineExecutableStatisticsKHR>(
      vkGetDeviceProcAddr(gpu.device, "vkGetPipelineExecutableStatisticsKHR"));
  if (!gpu.executables || !gpu.statistics) fail(2, gpu.name + ": the extension's entry points");
  return gpu;
}

void report(const Gpu& gpu, const std::string& path) {
  const auto words = read_words(path);
  const Module module = parse(path, words);

  std::map<std::uint32_t, std::vector<VkDescriptorSetLayoutBinding>> sets;
  for (const auto& [place, type] : module.bindings) {
    sets[place.first].push_back({place.second, type, 1, VK_SHADER_STAGE_COMPUTE_BIT, nullptr});
  }
  const std::uint32_t set_count = sets.empty() ? 0 : sets.rbegin()->first + 1;
  std::vector<VkDescriptorSetLayout> layouts(set_count, VK_NULL_HANDLE);
  for (std::uint32_t s = 0; s < set_count; ++s) {
    auto info =
        make<VkDescriptorSetLayoutCreateInfo>(VK_STRUCTURE_TYPE_DESCRIPTOR_SET_LAYOUT_CREATE_INFO);
    const auto found = sets.find(s);
    if (found != sets.end()) {
      info.bindingCount = static_cast<std::uint32_t>(found->second.size());
      info.pBindings = found->second.data();
    }
    check(vkCreateDescriptorSetLayout(gpu.device, &info, nullptr, &layouts[s]),
          "vkCreateDescriptorSetLayout");
  }
  auto layout_info =
      make<VkPipelineLayoutCreateInfo>(VK_STRUCTURE_TYPE_PIPELINE_LAYOUT_CREATE_INFO);
  layout_info.setLayoutCount = set_count;
  layout_info.pSetLayouts = layouts.data();
  VkPipelineLayout layout;
  check(vkCreatePipelineLayout(gpu.device, &layout_info, nullptr, &layout),
        "vkCreatePipelineLayout");

  auto shader_info = make<VkShaderModuleCreateInfo>(VK_STRUCTURE_TYPE_SHADER_MODULE_CREATE_INFO);
  shader_info.codeSize = words.size() * 4;
  shader_info.pCode = words.data();
  VkShaderModule shader;
  check(vkCreateShaderModule(gpu.device, &shader_info, nullptr, &shader), "vkCreateShaderModule");
  auto pipeline_info =
      make<VkComputePipelineCreateInfo>(VK_STRUCTURE_TYPE_COMPUTE_PIPELINE_CREATE_INFO);
  pipeline_info.flags = VK_PIPELINE_CREATE_CAPTURE_STATISTICS_BIT_KHR;
  pipeline_info.stage =
      make<VkPipelineShaderStageCreateInfo>(VK_STRUCTURE_TYPE_PIPELINE_SHADER_STAGE_CREATE_INFO);
  pipeline_info.stage.stage = VK_SHADER_STAGE_COMPUTE_BIT;
  pipeline_info.stage.module = shader;
  pipeline_info.stage.pName = module.entry_point.c_str();
  pipeline_info.layout = layout;
  VkPipeline pipeline;
  check(vkCreateComputePipelines(gpu.device, VK_NULL_HANDLE, 1, &pipeline_info, nullptr, &pipeline),
        "vkCreateComputePipelines");

  auto pipeline_ref = make<VkPipelineInfoKHR>(VK_STRUCTURE_TYPE_PIPELINE_INFO_KHR);
  pipeline_ref.pipeline = pipeline;
  const auto properties = query_all<VkPipelineExecutablePropertiesKHR>(
      gpu.executables, gpu.device, &pipeline_ref,
      VK_STRUCTURE_TYPE_PIPELINE_EXECUTABLE_PROPERTIES_KHR, "vkGetPipelineExecutablePropertiesKHR");
  for (std::uint32_t e = 0; e < properties.size(); ++e) {
    auto executable =
        make<VkPipelineExecutableInfoKHR>(VK_STRUCTURE_TYPE_PIPELINE_EXECUTABLE_INFO_KHR);
    executable.pipeline = pipeline;
    executable.executableIndex = e;
    const auto statistics = query_all<VkPipelineExecutableStatisticKHR>(
        gpu.statistics, gpu.device, &executable,
        VK_STRUCTURE_TYPE_PIPELINE_EXECUTABLE_STATISTIC_KHR,
        "vkGetPipelineExecutableStatisticsKHR");
    std::string line = "{\"file\": " + quoted(path) + ", \"device\": " + quoted(gpu.name) +
                       ", \"executable\": " + quoted(properties[e].name) +
                       ", \"subgroup_size\": " + std::to_string(properties[e].subgroupSize) +
                       ", \"statistics\": {";
    for (std::uint32_t s = 0; s < statistics.size(); ++s) {
      line += (s ? ", " : "") + quoted(statistics[s].name) + ": " + value_text(statistics[s]);
    }
    std::printf("%s}}\n", line.c_str());
  }
  vkDestroyPipeline(gpu.device, pipeline, nullptr);
  vkDestroyShaderModule(gpu.device, shader, nullptr);
  vkDestroyPipelineLayout(gpu.device, layout, nullptr);
  for (const auto set_layout : layouts) {
    vkDestroyDescriptorSetLayout(gpu.device, set_layout, nullptr);
  }
}

}  // namespace

int main(int argc, char** argv) {
  std::string filter;
  bool robust_access = true;
  std::vector<std::string> files;
  for (int a = 1; a < argc; ++a) {
    const std::string arg = argv[a];
    if (arg == "--device" && a + 1 < argc) {
      filter = argv[++a];
    } else if (arg == "--no-robust-access") {
      robust_access = false;
    } else {
      files.push_back(arg);
    }
  }
  if (files.empty())
    fail(1, "usage: pipeline_stats [--device SUBSTRING] [--no-robust-access] FILE.spirv...");
  const Gpu gpu = open_gpu(filter, robust_access);
  for (const auto& file : files) report(gpu, file);
  vkDestroyDevice(gpu.device, nullptr);
  vkDestroyInstance(gpu.instance, nullptr);
  return 0;
}

#include "hangscope/facts/gpu.h"

#include <re2/re2.h>

#include <algorithm>
#include <set>
#include <sstream>

#include "hangscope/common/error.h"
#include "hangscope/common/files.h"
#include "hangscope/common/subprocess.h"
#include "hangscope/common/text.h"
#include "hangscope/model/fact_keys.h"

namespace hangscope::facts {
namespace {

std::vector<std::string> split(const std::string& text, char separator) {
  std::vector<std::string> out;
  std::string item;
  std::istringstream in(text);
  while (std::getline(in, item, separator)) out.push_back(item);
  if (!text.empty() && text.back() == separator) out.emplace_back();
  return out;
}

std::string strip_ansi(const std::string& text) {
  static const RE2 escape("\x1b\\[[0-9;]*[A-Za-z]");
  std::string out = text;
  RE2::GlobalReplace(&out, escape, "");
  return out;
}

// "memory.total [MiB]" → "memory.total".
std::string field_name(const std::string& header) {
  const std::string t = trim(header);
  const auto bracket = t.find(" [");
  return bracket == std::string::npos ? t : t.substr(0, bracket);
}

// nvidia-smi prints "[N/A]" / "[Not Supported]" for what a GPU cannot say.
std::string value_or_empty(const std::string& v) {
  const std::string t = trim(v);
  return !t.empty() && t.front() == '[' ? "" : t;
}

bool is_gpu(const std::string& device) {
  return device.rfind("GPU", 0) == 0;
}

// "GPU0-GPU1" pairs and their link, upper triangle only.
std::map<std::string, int> gpu_link_counts(const TopologyMatrix& m) {
  std::map<std::string, int> counts;
  for (std::size_t i = 0; i < m.devices.size(); ++i) {
    for (std::size_t j = i + 1; j < m.devices.size(); ++j) {
      if (is_gpu(m.devices[i]) && is_gpu(m.devices[j]) && j < m.links[i].size()) {
        ++counts[m.links[i][j]];
      }
    }
  }
  return counts;
}

bool is_nvlink(const std::string& link) {
  return link.rfind("NV", 0) == 0;
}

void derive_links(GpuTopology& t) {
  if (t.nvswitch_devices > 0) t.nvswitch = true;
  if (!t.matrix) return;
  const auto counts = gpu_link_counts(*t.matrix);
  if (counts.empty()) return;
  int nv = 0, total = 0;
  for (const auto& [link, n] : counts) {
    total += n;
    nv += is_nvlink(link) ? n : 0;
  }
  t.nvlink = nv > 0;
  const auto gpus = std::count_if(t.matrix->devices.begin(), t.matrix->devices.end(), is_gpu);
  if (!t.nvswitch) t.nvswitch = gpus >= 4 && nv == total;
}

// Model, bus location and minor number from /proc/driver/nvidia/gpus/<bus>/information.
Gpu parse_information(const std::string& text) {
  Gpu gpu;
  for (const auto& line : split_lines(text)) {
    const auto colon = line.find(':');
    if (colon == std::string::npos) continue;
    const std::string key = trim(line.substr(0, colon));
    const std::string value = trim(line.substr(colon + 1));
    if (key == "Model") gpu.name = value;
    if (key == "Bus Location") gpu.bus_id = value;
    if (key == "Device Minor") gpu.index = std::atoi(value.c_str());
  }
  return gpu;
}

std::string first_line(const std::string& path) {
  const auto read = read_file(path, 4096);
  return read.text ? trim(read.text->substr(0, read.text->find('\n'))) : "";
}

void read_proc_driver(const std::string& root, GpuTopology& t) {
  const std::string dir = root + "/proc/driver/nvidia";
  if (const auto version = read_file(dir + "/version", 4096); version.text) {
    t.driver_version = parse_nvrm_version(*version.text);
    t.source = "/proc/driver/nvidia";
  }
  for (const auto& bus : list_directory(dir + "/gpus").value_or(std::vector<std::string>{})) {
    const auto info = read_file(dir + "/gpus/" + bus + "/information", 16384);
    if (!info.text) {
      t.notes.push_back(
          errno_message("cannot read " + dir + "/gpus/" + bus + "/information", info.error));
      continue;
    }
    Gpu gpu = parse_information(*info.text);
    if (gpu.bus_id.empty()) gpu.bus_id = bus;
    t.gpus.push_back(gpu);
  }
  std::sort(t.gpus.begin(), t.gpus.end(),
            [](const Gpu& a, const Gpu& b) { return a.bus_id < b.bus_id; });
}

void read_sysfs(const std::string& root, GpuTopology& t) {
  const std::string dir = root + "/sys/bus/pci/devices";
  int gpus = 0;
  for (const auto& device : list_directory(dir).value_or(std::vector<std::string>{})) {
    if (first_line(dir + "/" + device + "/vendor") != "0x10de") continue;
    const std::string klass = first_line(dir + "/" + device + "/class");
    if (klass.rfind("0x0300", 0) == 0 || klass.rfind("0x0302", 0) == 0) ++gpus;
    if (klass.rfind("0x0680", 0) == 0) ++t.nvswitch_devices;
  }
  if (t.gpus.empty() && gpus > 0) {
    t.source = "sysfs";
    t.gpus.resize(static_cast<std::size_t>(gpus));
    t.notes.push_back(std::to_string(gpus) +
                      " NVIDIA GPU(s) on the PCI bus but no driver information");
  }
}

// nvidia-smi's output for `args`, or "" with a note on `t` when it did not answer in time.
std::string run_nvidia_smi(GpuTopology& t, const std::vector<std::string>& args, int timeout_ms) {
  std::vector<std::string> argv = {"nvidia-smi"};
  argv.insert(argv.end(), args.begin(), args.end());
  const auto result = run_program(argv, std::chrono::milliseconds(timeout_ms));
  if (!result.ok()) t.notes.push_back(result.error);
  return result.ok() ? result.output : "";
}

}  // namespace

std::vector<Gpu> parse_nvidia_smi_query(const std::string& csv,
                                        const std::vector<std::string>& fields_if_noheader) {
  std::vector<Gpu> gpus;
  std::vector<std::string> fields = fields_if_noheader;
  int line_number = 0;
  for (const auto& line : split_lines(csv)) {
    ++line_number;
    if (trim(line).empty()) continue;
    const auto cells = split(line, ',');
    if (fields.empty()) {
      for (const auto& c : cells) fields.push_back(field_name(c));
      if (std::find(fields.begin(), fields.end(), "index") == fields.end() &&
          std::find(fields.begin(), fields.end(), "name") == fields.end()) {
        throw Error("line " + std::to_string(line_number) +
                    ": not an nvidia-smi --query-gpu header (no index or name field): " + line);
      }
      continue;
    }
    if (cells.size() != fields.size()) {
      throw Error("line " + std::to_string(line_number) + ": " + std::to_string(cells.size()) +
                  " values for " + std::to_string(fields.size()) + " fields: " + line);
    }
    Gpu gpu;
    for (std::size_t i = 0; i < fields.size(); ++i) {
      const std::string v = value_or_empty(cells[i]);
      if (fields[i] == "index") gpu.index = v.empty() ? -1 : std::atoi(v.c_str());
      if (fields[i] == "name") gpu.name = v;
      if (fields[i] == "pci.bus_id") gpu.bus_id = v;
      if (fields[i] == "compute_cap") gpu.compute_cap = v;
      if (fields[i] == "memory.total") gpu.memory_total = v;
    }
    gpus.push_back(gpu);
  }
  if (fields.empty()) throw Error("empty nvidia-smi --query-gpu output");
  return gpus;
}

TopologyMatrix parse_nvidia_smi_topo(const std::string& text) {
  static const RE2 device_name("(GPU|NIC)[0-9]+");
  static const RE2 nic_legend("\\s*(NIC[0-9]+):\\s*(\\S+)\\s*");
  TopologyMatrix m;
  bool header_seen = false;
  for (const auto& raw : split_lines(strip_ansi(text))) {
    if (trim(raw).empty()) continue;
    std::string nic, interface;
    if (RE2::FullMatch(raw, nic_legend, &nic, &interface)) {
      m.nic_names[nic] = interface;
      continue;
    }
    if (trim(raw).rfind("Legend", 0) == 0) continue;
    auto cells = split(raw, '\t');
    for (auto& c : cells) c = trim(c);
    if (!header_seen) {
      for (const auto& c : cells) {
        if (RE2::FullMatch(c, device_name)) m.devices.push_back(c);
      }
      header_seen = !m.devices.empty();
      continue;
    }
    if (cells.empty() || !RE2::FullMatch(cells[0], device_name)) continue;
    if (m.links.size() >= m.devices.size()) continue;
    std::vector<std::string> row(cells.begin() + 1,
                                 cells.begin() + std::min(cells.size(), m.devices.size() + 1));
    row.resize(m.devices.size());
    m.links.push_back(row);
  }
  if (m.links.empty() || std::none_of(m.devices.begin(), m.devices.end(), is_gpu)) {
    throw Error("no GPU rows in the nvidia-smi topo -m output");
  }
  return m;
}

std::string parse_nvrm_version(const std::string& text) {
  static const RE2 version("Kernel Module(?: for [^ ]+)?\\s+([0-9]+(?:\\.[0-9]+)+)");
  std::string number;
  return RE2::PartialMatch(text, version, &number) ? number : "";
}

GpuTopology gpu_topology_from_files(const std::string& root) {
  GpuTopology t;
  t.source = "none";
  read_proc_driver(root, t);
  read_sysfs(root, t);
  derive_links(t);
  return t;
}

void apply_nvidia_smi(GpuTopology& t, const std::string& query_csv, const std::string& topo_text) {
  if (!query_csv.empty()) {
    try {
      t.gpus = parse_nvidia_smi_query(query_csv);
      t.source = "nvidia-smi";
    } catch (const Error& e) {
      t.notes.push_back(std::string("nvidia-smi --query-gpu: ") + e.what());
    }
  }
  if (!topo_text.empty()) {
    try {
      t.matrix = parse_nvidia_smi_topo(topo_text);
    } catch (const Error& e) {
      t.notes.push_back(std::string("nvidia-smi topo -m: ") + e.what());
    }
  }
  derive_links(t);
}

GpuTopology gpu_topology(const std::string& root, int timeout_ms) {
  GpuTopology t = gpu_topology_from_files(root);
  if (t.driver_version.empty()) return t;  // no driver: nvidia-smi could only fail or hang
  const std::string query = run_nvidia_smi(
      t, {"--query-gpu=index,name,pci.bus_id,compute_cap,memory.total", "--format=csv"},
      timeout_ms);
  const std::string topo = query.empty() ? "" : run_nvidia_smi(t, {"topo", "-m"}, timeout_ms);
  apply_nvidia_smi(t, query, topo);
  return t;
}

std::map<std::string, std::string> GpuTopology::facts() const {
  std::map<std::string, std::string> out;
  out[model::fact_keys::kGpuCount] = std::to_string(gpus.size());
  out[model::fact_keys::kGpuSource] = source;
  std::map<std::string, int> models;
  std::set<std::string> caps;
  for (const auto& g : gpus) {
    if (!g.name.empty()) ++models[g.name];
    if (!g.compute_cap.empty()) caps.insert(g.compute_cap);
  }
  std::string model;
  for (const auto& [name, n] : models) {
    model += (model.empty() ? "" : ", ") + name + " ×" + std::to_string(n);
  }
  if (!model.empty()) out[model::fact_keys::kGpuModel] = model;
  std::string cap;
  for (const auto& c : caps) cap += (cap.empty() ? "" : ", ") + c;
  if (!cap.empty()) out[model::fact_keys::kGpuComputeCapability] = cap;
  if (!driver_version.empty()) out[model::fact_keys::kGpuDriver] = driver_version;
  if (nvlink) out[model::fact_keys::kGpuNvlink] = *nvlink ? "yes" : "no";
  if (nvswitch) out[model::fact_keys::kGpuNvswitch] = *nvswitch ? "yes" : "no";
  if (matrix) {
    std::string links;
    for (const auto& [link, n] : gpu_link_counts(*matrix)) {
      links += (links.empty() ? "" : ", ") + link + " ×" + std::to_string(n);
    }
    if (!links.empty()) out[model::fact_keys::kGpuLinks] = links + " (GPU pairs)";
  }
  if (!notes.empty()) {
    std::string all;
    for (const auto& n : notes) all += (all.empty() ? "" : "; ") + n;
    out[model::fact_keys::kGpuNotes] = all;
  }
  return out;
}

}  // namespace hangscope::facts

// The node's NVIDIA GPUs and how they are linked (NVLink, NVSwitch, PCIe), from nvidia-smi
// when it answers in time, else from /proc/driver/nvidia and sysfs. No GPU is a fact ("0"),
// not an error. The parsers take the tools' text exactly as they print it.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

namespace hangscope::facts {

struct Gpu {
  int index = -1;
  std::string name;          // "NVIDIA H100 80GB HBM3"
  std::string bus_id;        // "00000000:18:00.0"
  std::string compute_cap;   // "9.0" ("" when the tool does not say)
  std::string memory_total;  // "81559 MiB"
};

// `nvidia-smi topo -m`: the link between each pair of devices ("X", "NV18", "PIX", "SYS", …).
struct TopologyMatrix {
  std::vector<std::string> devices;              // "GPU0", …, "NIC0", … in column order
  std::vector<std::vector<std::string>> links;   // links[i][j], i and j index devices
  std::map<std::string, std::string> nic_names;  // "NIC0" → "mlx5_0" (its NIC Legend)
};

struct GpuTopology {
  std::string source;  // "nvidia-smi", "/proc/driver/nvidia", "sysfs" or "none"
  std::string driver_version;
  std::vector<Gpu> gpus;
  std::optional<TopologyMatrix> matrix;
  std::optional<bool> nvlink;      // some GPU pair is linked by NVLink (unknown without a matrix)
  std::optional<bool> nvswitch;    // NVSwitch devices on the PCI bus, or NVLink between all pairs
  int nvswitch_devices = 0;        // NVIDIA bridge-class PCI functions (NVSwitch) seen in sysfs
  std::vector<std::string> notes;  // what could not be read, and why

  // "gpu.count", "gpu.model", "gpu.compute_capability", "gpu.driver", "gpu.nvlink",
  // "gpu.nvswitch", "gpu.links", "gpu.source": only what is known.
  std::map<std::string, std::string> facts() const;
};

// `nvidia-smi --query-gpu=index,name,pci.bus_id,compute_cap,memory.total --format=csv` (any
// order and subset of those fields, header with units, or noheader with the fields given).
// Throws Error naming the line when the text is not that table.
std::vector<Gpu> parse_nvidia_smi_query(const std::string& csv,
                                        const std::vector<std::string>& fields_if_noheader = {});

// `nvidia-smi topo -m` (tab-separated, ANSI underline codes in the header, legend after).
// Throws Error when no GPU rows are found.
TopologyMatrix parse_nvidia_smi_topo(const std::string& text);

// "535.104.05" from /proc/driver/nvidia/version's "NVRM version: … Kernel Module  535.104.05 …".
std::string parse_nvrm_version(const std::string& text);

// Adds what nvidia-smi printed (query CSV, topo -m; either may be empty) to `t`: GPUs with
// compute capability, the link matrix, NVLink and NVSwitch. Unparsable text becomes a note.
void apply_nvidia_smi(GpuTopology& t, const std::string& query_csv, const std::string& topo_text);

// What the files under `root` say (ROOT/proc/driver/nvidia, ROOT/sys/bus/pci/devices).
GpuTopology gpu_topology_from_files(const std::string& root);

// The node's GPUs: files first; when the driver is loaded, nvidia-smi (query and topo -m,
// each bounded by `timeout_ms`) adds compute capability and links. nvidia-smi is not run when
// there is no driver.
GpuTopology gpu_topology(const std::string& root = "", int timeout_ms = 5000);

}  // namespace hangscope::facts

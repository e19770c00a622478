// A read-only memory mapping of a whole file, unmapped when destroyed.
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <memory>
#include <span>
#include <string>

#include "hangscope/common/files.h"

namespace hangscope::elf {

class MappedFile {
 public:
  // Maps a regular file read-only (opened by open_regular_file under `rules`: a FIFO, device or
  // refused link is never opened); throws hangscope::Error "WHAT PATH: reason" when it cannot.
  static std::unique_ptr<MappedFile> open(const std::string& path, const OpenRules& rules = {},
                                          const std::string& what = "cannot open");
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  std::span<const std::byte> bytes() const { return {data_, size_}; }
  dev_t device() const { return device_; }
  ino_t inode() const { return inode_; }

 private:
  MappedFile(const std::byte* data, std::size_t size, dev_t device, ino_t inode)
      : data_(data), size_(size), device_(device), inode_(inode) {}

  const std::byte* data_;
  std::size_t size_;
  dev_t device_;
  ino_t inode_;
};

}  // namespace hangscope::elf

#include "hangscope/elf/mapped_file.h"

#include <sys/mman.h>

#include <cerrno>

#include "hangscope/common/error.h"
#include "hangscope/common/text.h"

namespace hangscope::elf {

std::unique_ptr<MappedFile> MappedFile::open(const std::string& path, const OpenRules& rules,
                                             const std::string& what) {
  // Never blocks on a FIFO, never opens a device: refused with the reason before any open.
  const OpenedFile file = open_regular_file(path, what, rules);
  if (!file.ok()) {
    if (file.error == EPERM) throw Error(file.why());
    throw SystemError(file.name, file.error);
  }
  const auto size = static_cast<std::size_t>(file.st.st_size);
  void* data = nullptr;
  if (size > 0) {
    data = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, file.fd.get(), 0);
    if (data == MAP_FAILED) throw_errno("cannot map " + printable(path), errno);
  }
  return std::unique_ptr<MappedFile>(
      new MappedFile(static_cast<const std::byte*>(data), size, file.st.st_dev, file.st.st_ino));
}

MappedFile::~MappedFile() {
  if (data_ != nullptr) ::munmap(const_cast<std::byte*>(data_), size_);
}

}  // namespace hangscope::elf

// Finding a program as the shell would: the launcher's check of the command,
// --check-build's launchers and ringlet-topo's all ask here.
#pragma once

#include <string>

namespace ringletrun {

// The path of `program` on PATH (an empty entry is the working directory), or
// "" where no executable file of that name is found.
std::string find_on_path(const std::string& program);

// Whether `path` is an executable regular file.
bool is_executable_file(const std::string& path);

}  // namespace ringletrun

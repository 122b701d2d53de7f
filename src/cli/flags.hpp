// One vocabulary of flags across commands (docs/cli.md, "Flags"). Old
// spellings stay accepted: before parsing, each is rewritten to its new name
// and warned about once, so --help lists only the new names and the new
// option's checks apply to the old spelling too.
#pragma once

#include <string>
#include <vector>

namespace tessera::cli {

struct RenamedFlag {
  const char* command;  // the command path ("dra", "fleet plan")
  const char* old_name;
  const char* new_name;
};

// Every renamed flag (docs/cli.md lists them).
const std::vector<RenamedFlag>& renamed_flags();

// argv with every old spelling of its command's flags rewritten ("--old", "--old=V", "-oV" for a
// short one); each rewrite warned once on `err` as "tessera CMD: OLD is now NEW ...". The command
// path is read from the words before the first option.
std::vector<std::string> rewrite_renamed_flags(const std::vector<std::string>& argv, std::ostream& err);

}  // namespace tessera::cli

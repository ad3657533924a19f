#pragma once
// Helpers for the man-page generators: each page is a troff template (packaging/man/*.in) whose
// @PLACEHOLDERS@ are filled from the same tables the programs print --help from, so a page
// cannot drift from the option it documents.
#include <map>
#include <string>
#include <string_view>

namespace pipette::man {

// Text for troff: backslashes doubled, a leading '.' or '\'' neutralised on every line.
std::string escape(std::string_view text);
// An option or command name: as escape(), and '-' as "\-" so it renders as a typeable minus.
std::string literal(std::string_view text);
// Preformatted lines (.nf … .fi), e.g. a --help text or a commented file.
std::string verbatim(std::string_view text);

// Replaces every @KEY@ of `page` with values[KEY]; returns false (and names it in `error`) when the
// template uses a key not given or a given key is never used.
bool fill(std::string& page, const std::map<std::string, std::string>& values, std::string& error);

// main() of a generator: reads the template argv[1], fills it (and @DATE@ with argv[3], the
// build's date, SOURCE_DATE_EPOCH when set), writes argv[2].
int generate(int argc, char** argv, std::map<std::string, std::string> values);

}  // namespace pipette::man

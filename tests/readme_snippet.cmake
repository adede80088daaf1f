# readme_snippet.cmake: the README's code block that follows
# "<!-- snippet: FILE -->" must be exactly FILE, so README code is always
# compiled and run (house rule 9). Run by CTest.
file(READ "${ROOT}/README.md" readme)
string(REGEX MATCHALL "<!-- snippet: [^ ]+ -->\n```cpp\n" markers "${readme}")
if(NOT markers)
  message(FATAL_ERROR "README.md has no snippet markers")
endif()
foreach(marker IN LISTS markers)
  string(REGEX REPLACE "<!-- snippet: ([^ ]+) -->.*" "\\1" path "${marker}")
  file(READ "${ROOT}/${path}" code)
  string(FIND "${readme}" "${marker}${code}```" at)
  if(at EQUAL -1)
    message(FATAL_ERROR "README.md: the code block after '<!-- snippet: ${path} -->' differs from ${path}")
  endif()
endforeach()
message(STATUS "README snippets: ok")

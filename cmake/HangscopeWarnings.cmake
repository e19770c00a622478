# hangscope_warnings(TARGET): strict warnings (as errors unless HANGSCOPE_WERROR=OFF) for project code.
function(hangscope_warnings target)
  target_compile_options(${target} PRIVATE
    -Wall -Wextra -Wpedantic -Wshadow -Wconversion -Wno-sign-conversion
    -Wnon-virtual-dtor -Wold-style-cast -Woverloaded-virtual
    -Wimplicit-fallthrough -Wformat=2)
  # GCC 12 at -O3 (Release) reports -Wrestrict on std::string's own inlined memcpy in code that
  # only appends or concatenates strings (GCC bug 105329, fixed in GCC 13): about ten false
  # positives, all inside libstdc++'s char_traits.h. Off for GCC 12 alone.
  target_compile_options(${target} PRIVATE
    $<$<AND:$<CXX_COMPILER_ID:GNU>,$<VERSION_LESS:$<CXX_COMPILER_VERSION>,13>>:-Wno-restrict>)
  if(HANGSCOPE_WERROR)
    target_compile_options(${target} PRIVATE -Werror)
  endif()
endfunction()

# One static library per area (docs/architecture.md), linked only downward.
#
#   hangscope_area(NAME SOURCES file... [DEPENDS area...] [LINK target...])
#
# - Areas are declared bottom-up in src/CMakeLists.txt: an area may depend only on areas
#   declared before it, so a cycle or an upward link fails at configure time with the two
#   names. (CMake alone allows cycles between static libraries.)
# - Each area's public headers (include/hangscope/NAME/) are visible only to it and to the
#   areas above it that link it: its include directory is a root of its own in the build tree,
#   build/areas/NAME/hangscope/NAME -> include/hangscope/NAME. An upward include does not
#   compile ("hangscope/analysis/...: No such file"); tools/check-layers.py names it clearly
#   in the unit tier.
# - A dependency is linked PRIVATE unless the area's public headers include it: an area sees the
#   headers of the areas it declares, and of those their public headers need, never the whole
#   closure below it. check-layers.py holds every include to the declared edges.
# - The graph is written to build/areas.txt (one "NAME: DEPENDS..." line per area, bottom-up)
#   for the layering check and docs/architecture.md.
set(HANGSCOPE_AREAS_FILE ${CMAKE_BINARY_DIR}/areas.txt)
file(WRITE ${HANGSCOPE_AREAS_FILE} "")
set_property(GLOBAL PROPERTY HANGSCOPE_AREAS "")

function(hangscope_area name)
  cmake_parse_arguments(PARSE_ARGV 1 AREA "" "" "SOURCES;DEPENDS;LINK")
  get_property(declared GLOBAL PROPERTY HANGSCOPE_AREAS)
  foreach(dependency IN LISTS AREA_DEPENDS)
    if(NOT dependency IN_LIST declared)
      message(FATAL_ERROR "hangscope: area '${name}' depends on '${dependency}', which is not "
                          "declared below it in src/CMakeLists.txt (areas link only downward)")
    endif()
  endforeach()
  if(name IN_LIST declared)
    message(FATAL_ERROR "hangscope: area '${name}' is declared twice")
  endif()

  set(target hangscope_${name})
  add_library(${target} STATIC ${AREA_SOURCES})
  set(headers ${PROJECT_SOURCE_DIR}/include/hangscope/${name})
  set(root ${CMAKE_BINARY_DIR}/areas/${name})
  if(EXISTS ${headers})
    file(MAKE_DIRECTORY ${root}/hangscope)
    file(CREATE_LINK ${headers} ${root}/hangscope/${name} SYMBOLIC)
  endif()
  target_include_directories(${target} PUBLIC ${root} PRIVATE ${PROJECT_SOURCE_DIR}/src/${name})
  # A dependency is linked PUBLIC only when the area's own public headers include its headers
  # (then every user of the area needs them too); otherwise PRIVATE, so an area above sees only
  # the areas it declares itself.
  file(GLOB_RECURSE public_headers CONFIGURE_DEPENDS ${headers}/*.h)
  foreach(dependency IN LISTS AREA_DEPENDS)
    set(scope PRIVATE)
    foreach(header IN LISTS public_headers)
      file(STRINGS ${header} uses REGEX "#include \"hangscope/${dependency}/")
      if(uses)
        set(scope PUBLIC)
        break()
      endif()
    endforeach()
    target_link_libraries(${target} ${scope} hangscope_${dependency})
  endforeach()
  target_link_libraries(${target} PUBLIC ${AREA_LINK})
  hangscope_warnings(${target})

  set_property(GLOBAL APPEND PROPERTY HANGSCOPE_AREAS ${name})
  list(JOIN AREA_DEPENDS " " listed)
  file(APPEND ${HANGSCOPE_AREAS_FILE} "${name}: ${listed}\n")
endfunction()

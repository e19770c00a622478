# The gRPC stack of the hangscope executable from Debian's static archives.
#
# Why: gRPC, protobuf and abseil are 56 shared libraries; binding them cost `hangscope` about
# 14 ms of every start (measured with perf: do_lookup_x / _dl_relocate_object), more than a
# whole one-process capture. Linked from their .a files (Debian ships them, built as PIC) a
# start costs about 10 ms less. OpenSSL and zlib stay shared so that Debian's security updates
# reach the agent's TLS. The test executables keep the shared libraries (faster to link).
#
# hangscope_rpc_libs: link it instead of gRPC::grpc++ / protobuf::libprotobuf. A target whose
# HANGSCOPE_STATIC_RPC property is ON gets the archives, every other target the shared ones.

option(HANGSCOPE_STATIC_RPC "Link the hangscope executable's gRPC/protobuf/abseil statically" ON)
if(HANGSCOPE_TSAN)
  # Shared: code linked from static archives would sit inside the instrumented executable, where
  # ignore_noninstrumented_modules (tests/tsan.supp) cannot tell it from hangscope's own.
  set(HANGSCOPE_STATIC_RPC OFF)
endif()

# Appends to `out_var` the static archive of every shared library reachable from `roots`
# through INTERFACE_LINK_LIBRARIES, except `keep_shared`; sets `<out_var>_MISSING` to the
# libraries without one.
function(hangscope_collect_archives out_var roots keep_shared)
  set(queue ${roots})
  set(seen "")
  set(archives "")
  set(missing "")
  while(queue)
    list(POP_FRONT queue item)
    string(REGEX REPLACE "^\\$<LINK_ONLY:(.*)>$" "\\1" item "${item}")
    if(item IN_LIST seen OR item MATCHES "^-Wl|^-L|^-pthread$|^\\$<")
      continue()
    endif()
    list(APPEND seen "${item}")
    set(file "")
    if(TARGET ${item})
      get_target_property(type ${item} TYPE)
      if(NOT type STREQUAL "INTERFACE_LIBRARY")
        get_target_property(file ${item} LOCATION)
      endif()
      get_target_property(deps ${item} INTERFACE_LINK_LIBRARIES)
      if(deps)
        list(APPEND queue ${deps})
      endif()
    elseif(item MATCHES "^/")
      set(file "${item}")
    else()
      string(REGEX REPLACE "^-l" "" name "${item}")
      set(file "lib${name}.so")
    endif()
    if(NOT file)
      continue()
    endif()
    get_filename_component(dir "${file}" DIRECTORY)
    get_filename_component(base "${file}" NAME)
    string(REGEX REPLACE "^lib(.*)\\.(so|a).*$" "\\1" name "${base}")
    if(name IN_LIST keep_shared)
      continue()
    endif()
    find_library(_archive_${name} NAMES lib${name}.a HINTS ${dir} NO_CACHE)
    if(_archive_${name})
      list(APPEND archives "${_archive_${name}}")
    else()
      list(APPEND missing "${name}")
    endif()
  endwhile()
  list(REMOVE_DUPLICATES archives)
  set(${out_var} "${archives}" PARENT_SCOPE)
  set(${out_var}_MISSING "${missing}" PARENT_SCOPE)
endfunction()

# re2::re2 is gRPC's dependency and hangscope's rule matcher: named here so that it is linked
# once, from the same kind of library as gRPC (never libre2.a and libre2.so together).
set(_shared_rpc gRPC::grpc++ protobuf::libprotobuf re2::re2)
add_library(hangscope_rpc_libs INTERFACE)
set(_static_wanted "$<BOOL:$<TARGET_PROPERTY:HANGSCOPE_STATIC_RPC>>")
if(HANGSCOPE_STATIC_RPC)
  hangscope_collect_archives(_rpc_archives "${_shared_rpc}"
                             "ssl;crypto;z;dl;m;rt;pthread;atomic;c;stdc++")
  if(_rpc_archives_MISSING)
    message(STATUS "hangscope: no static archive for ${_rpc_archives_MISSING}: "
                   "the gRPC stack is linked shared")
    set(HANGSCOPE_STATIC_RPC OFF)
  endif()
endif()
if(HANGSCOPE_STATIC_RPC)
  find_package(OpenSSL REQUIRED COMPONENTS SSL Crypto)
  find_package(ZLIB REQUIRED)
  # One generator expression per item: a list inside one would be split before evaluation.
  set(_static_items -Wl,--start-group ${_rpc_archives} -Wl,--end-group OpenSSL::SSL
                    OpenSSL::Crypto ZLIB::ZLIB Threads::Threads dl m rt)
  foreach(item IN LISTS _shared_rpc)
    target_link_libraries(hangscope_rpc_libs INTERFACE "$<$<NOT:${_static_wanted}>:${item}>")
  endforeach()
  foreach(item IN LISTS _static_items)
    target_link_libraries(hangscope_rpc_libs INTERFACE "$<${_static_wanted}:${item}>")
  endforeach()
  # Compile usage requirements (include directories) for every target.
  target_include_directories(hangscope_rpc_libs SYSTEM INTERFACE
    $<TARGET_PROPERTY:gRPC::grpc++,INTERFACE_INCLUDE_DIRECTORIES>
    $<TARGET_PROPERTY:protobuf::libprotobuf,INTERFACE_INCLUDE_DIRECTORIES>
    $<TARGET_PROPERTY:re2::re2,INTERFACE_INCLUDE_DIRECTORIES>)
else()
  target_link_libraries(hangscope_rpc_libs INTERFACE ${_shared_rpc})
endif()

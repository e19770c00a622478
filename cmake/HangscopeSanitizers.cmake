# HANGSCOPE_SANITIZE=ON: AddressSanitizer + UndefinedBehaviorSanitizer for every target.
# HANGSCOPE_TSAN=ON: ThreadSanitizer for every target (the concurrency pass of
# tools/run-tests.sh; tests/tsan.supp explains each suppression).
option(HANGSCOPE_TSAN "Build with ThreadSanitizer" OFF)
if(HANGSCOPE_SANITIZE AND HANGSCOPE_TSAN)
  message(FATAL_ERROR "HANGSCOPE_SANITIZE and HANGSCOPE_TSAN cannot be combined: use two builds")
endif()
if(HANGSCOPE_SANITIZE)
  add_compile_options(-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined)
  add_link_options(-fsanitize=address,undefined)
endif()
if(HANGSCOPE_TSAN)
  add_compile_options(-fsanitize=thread -fno-omit-frame-pointer)
  add_link_options(-fsanitize=thread)
endif()

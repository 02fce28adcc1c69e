if(MOESTREAM_SANITIZE STREQUAL "address")
  add_compile_options(-fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined)
  add_link_options(-fsanitize=address,undefined)
elseif(MOESTREAM_SANITIZE STREQUAL "thread")
  add_compile_options(-fsanitize=thread -fno-omit-frame-pointer)
  add_link_options(-fsanitize=thread)
  # A target_clones resolver runs while the program is being relocated, before
  # the TSan runtime is up, and its instrumented entry crashes there. The
  # clones give the same bits, so the sanitized build keeps only the default.
  add_compile_definitions(MOESTREAM_NO_TARGET_CLONES)
elseif(NOT MOESTREAM_SANITIZE STREQUAL "")
  message(FATAL_ERROR "MOESTREAM_SANITIZE must be '', 'address' or 'thread'")
endif()

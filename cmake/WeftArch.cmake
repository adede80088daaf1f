# WeftArch.cmake: picks the context-switch target (src/context/context_<target>*).
if(CMAKE_SYSTEM_PROCESSOR MATCHES "^(x86_64|AMD64|amd64)$")
  set(WEFT_CONTEXT_TARGET x86_64_sysv)
  set(WEFT_CONTEXT_TARGET_FAMILY x86_64)
elseif(CMAKE_SYSTEM_PROCESSOR MATCHES "^(aarch64|arm64|ARM64)$")
  set(WEFT_CONTEXT_TARGET aarch64_aapcs)
  set(WEFT_CONTEXT_TARGET_FAMILY aarch64)
else()
  message(FATAL_ERROR "weft: no context switch for processor '${CMAKE_SYSTEM_PROCESSOR}' "
                      "(supported: x86-64 System V, AArch64 AAPCS64)")
endif()
message(STATUS "weft: context switch target ${WEFT_CONTEXT_TARGET}")

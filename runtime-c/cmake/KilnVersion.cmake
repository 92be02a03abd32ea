# The runtime's version is the project's: [project] version in pyproject.toml,
# the one place it is written. Sets KILN_VERSION (MAJOR.MINOR.PATCH) and
# KILN_SOVERSION: MAJOR from 1.0 on; before 1.0 every minor release may break
# the ABI (semantic versioning), so it is 0.MINOR. The CMake package's version
# file and the pkg-config files follow the same rule.
#
# A copy of runtime-c built away from the repository passes -DKILN_VERSION=X.Y.Z.
set(KILN_PYPROJECT ${CMAKE_CURRENT_LIST_DIR}/../../pyproject.toml)
if(NOT KILN_VERSION)
  if(NOT EXISTS ${KILN_PYPROJECT})
    message(FATAL_ERROR "kiln: no ${KILN_PYPROJECT} to read the version from "
                        "(configure with -DKILN_VERSION=X.Y.Z)")
  endif()
  set_property(DIRECTORY APPEND PROPERTY CMAKE_CONFIGURE_DEPENDS ${KILN_PYPROJECT})
  file(STRINGS ${KILN_PYPROJECT} kiln_pyproject_lines)
  set(kiln_in_project OFF)
  foreach(line IN LISTS kiln_pyproject_lines)
    if(line MATCHES "^\\[([^]]*)\\]")
      if(CMAKE_MATCH_1 STREQUAL "project")
        set(kiln_in_project ON)
      else()
        set(kiln_in_project OFF)
      endif()
    elseif(kiln_in_project AND line MATCHES "^version *= *\"([^\"]*)\"")
      set(KILN_VERSION ${CMAKE_MATCH_1})
      break()
    endif()
  endforeach()
  if(NOT KILN_VERSION)
    message(FATAL_ERROR "kiln: ${KILN_PYPROJECT} has no version in its [project] table")
  endif()
endif()
if(NOT KILN_VERSION MATCHES "^([0-9]+)\\.([0-9]+)\\.([0-9]+)$")
  message(FATAL_ERROR "kiln: version '${KILN_VERSION}' is not MAJOR.MINOR.PATCH")
endif()
if(CMAKE_MATCH_1 EQUAL 0)
  set(KILN_SOVERSION 0.${CMAKE_MATCH_2})
  set(KILN_VERSION_COMPATIBILITY SameMinorVersion)
else()
  set(KILN_SOVERSION ${CMAKE_MATCH_1})
  set(KILN_VERSION_COMPATIBILITY SameMajorVersion)
endif()

# Runs `npm ci` in web/ only when node_modules is missing or older than package-lock.json.
# Usage: cmake -DNPM=... -DWEB_DIR=... -P npm-ci.cmake
set(marker "${WEB_DIR}/node_modules/.package-lock.json")
if(EXISTS "${marker}" AND NOT "${WEB_DIR}/package-lock.json" IS_NEWER_THAN "${marker}")
  return()
endif()
message(STATUS "web: npm install (from the committed lock file)")
# `npm ci` of npm 11 rejects this lock (it wants entries for rollup's optional platform packages that npm itself
# does not write with omit-lockfile-registry-resolved); `npm install` installs the locked versions and leaves the
# lock unchanged.
execute_process(COMMAND "${NPM}" install --no-audit --no-fund --prefer-offline
                WORKING_DIRECTORY "${WEB_DIR}" RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "web: npm install failed (${rc})")
endif()

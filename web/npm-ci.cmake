# Runs `npm ci` in web/ only when node_modules is missing or older than package-lock.json.
# Usage: cmake -DNPM=... -DWEB_DIR=... -P npm-ci.cmake
set(marker "${WEB_DIR}/node_modules/.package-lock.json")
if(EXISTS "${marker}" AND NOT "${WEB_DIR}/package-lock.json" IS_NEWER_THAN "${marker}")
  return()
endif()
message(STATUS "web: npm ci (from the committed lock file)")
# `npm ci` installs exactly the lock's versions and never rewrites the lock (a build must not change tracked
# files); it fails when package.json and the lock disagree. The lock lists rollup's optional platform packages,
# which npm 11 wants for `npm ci`.
execute_process(COMMAND "${NPM}" ci --no-audit --no-fund --prefer-offline
                WORKING_DIRECTORY "${WEB_DIR}" RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "web: npm ci failed (${rc})")
endif()

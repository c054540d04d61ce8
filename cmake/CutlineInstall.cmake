# Install rules and the Debian package (CPack DEB).
#   cmake --install build [--prefix /usr]   binaries to <prefix>/bin, examples, the policy's
#                                            JSON Schema, the Grafana dashboard and the
#                                            Prometheus config to
#                                            <prefix>/share/cutline, systemd units to
#                                            <prefix>/lib/systemd/system, and the service config
#                                            to <prefix>/etc/cutline (/etc/cutline for /usr)
#   (cd build && cpack -G DEB)               cutline_<version>_<arch>.deb with the same files
#                                            (the CUDA plugin aside), a `cutline` system user
#                                            created in postinst, /etc/cutline/* as conffiles, a
#                                            logrotate file, and purge removing the user and
#                                            /var/{lib,log,cache}/cutline; in a CUDA build also
#                                            cutline-backend-cuda_<version>_<arch>.deb with
#                                            <prefix>/lib/cutline/libcutline_cuda.so
# Components: `main` (everything but the plugin; the package `cutline`, whose binaries NEED no
# CUDA library) and `cuda` (the plugin, which NEEDs libcudart and libcublas).
include(GNUInstallDirs)
set(CMAKE_INSTALL_DEFAULT_COMPONENT_NAME main)

# Where the units' ExecStart finds the binaries: the package's prefix.
set(CUTLINE_UNIT_BINDIR "/usr/bin" CACHE STRING "Directory of the binaries in the systemd units")

foreach(_bin cutline-gateway cutline-backend cutline)
  if(TARGET ${_bin})
    install(TARGETS ${_bin} RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
  endif()
endforeach()

if(TARGET cutline_cuda)
  # backend/device's loader looks here relative to <prefix>/bin (../lib/cutline).
  install(TARGETS cutline_cuda LIBRARY DESTINATION lib/cutline COMPONENT cuda)
endif()

set(_deploy ${PROJECT_SOURCE_DIR}/deploy)
install(DIRECTORY ${_deploy}/policies/ DESTINATION ${CMAKE_INSTALL_DATADIR}/cutline/policies
        FILES_MATCHING PATTERN "*.yaml")
install(DIRECTORY ${_deploy}/grafana/ DESTINATION ${CMAKE_INSTALL_DATADIR}/cutline/grafana)
install(DIRECTORY ${_deploy}/prometheus/ DESTINATION ${CMAKE_INSTALL_DATADIR}/cutline/prometheus)
install(FILES ${_deploy}/policy.schema.json DESTINATION ${CMAKE_INSTALL_DATADIR}/cutline)
install(FILES ${PROJECT_SOURCE_DIR}/README.md
        DESTINATION ${CMAKE_INSTALL_DOCDIR})
install(FILES ${PROJECT_SOURCE_DIR}/policy/README.md DESTINATION ${CMAKE_INSTALL_DOCDIR}
        RENAME policy.md)

# logrotate: /etc/logrotate.d/cutline (a conffile), whatever the prefix (logrotate reads only
# /etc/logrotate.d): staged under DESTDIR like the service config below.
set(_etc_logrotate ${_deploy}/debian/logrotate)

foreach(_unit cutline-gateway cutline-backend)
  configure_file(${_deploy}/systemd/${_unit}.service
                 ${CMAKE_CURRENT_BINARY_DIR}/systemd/${_unit}.service @ONLY)
  install(FILES ${CMAKE_CURRENT_BINARY_DIR}/systemd/${_unit}.service
          DESTINATION lib/systemd/system)
endforeach()
# The service config goes to the install prefix's sysconfdir (GNUInstallDirs), decided when
# installing since the prefix may be given then (`cmake --install build --prefix X`, CPack's
# /usr): prefix /usr -> /etc/cutline (GNUInstallDirs' special case, the package's layout), any
# other prefix -> <prefix>/etc/cutline. file(INSTALL) honours DESTDIR (CPack's staging).
set(_etc_files ${_deploy}/systemd/cutline.yaml ${_deploy}/systemd/backend.env)
install(CODE "
  set(_sysconfdir \"${CMAKE_INSTALL_SYSCONFDIR}\")
  if(NOT IS_ABSOLUTE \"\${_sysconfdir}\")
    if(CMAKE_INSTALL_PREFIX STREQUAL \"/usr\" AND _sysconfdir STREQUAL \"etc\")
      set(_sysconfdir /etc)
    else()
      set(_sysconfdir \"\${CMAKE_INSTALL_PREFIX}/\${_sysconfdir}\")
    endif()
  endif()
  file(INSTALL DESTINATION \"\${_sysconfdir}/cutline\" TYPE FILE FILES ${_etc_files})
  file(INSTALL DESTINATION \"\${_sysconfdir}/logrotate.d\" TYPE FILE FILES ${_etc_logrotate}
       RENAME cutline)
")

set(CPACK_PACKAGE_NAME cutline)
set(CPACK_PACKAGE_VENDOR "Cutline")
set(CPACK_PACKAGE_CONTACT "Cutline maintainers <cutline@localhost>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY
    "Labeling OpenAI-compatible gateway and co-located inference backend")
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
# With DESTDIR (staging), CPack takes the prefix from CPACK_INSTALL_PREFIX: /usr, so the
# service config lands in the package's /etc/cutline.
set(CPACK_SET_DESTDIR ON)
set(CPACK_INSTALL_PREFIX /usr)
set(CPACK_STRIP_FILES ON)  # no debug info in the package
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION net)
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION ON)
set(CPACK_DEB_COMPONENT_INSTALL ON)
set(CPACK_COMPONENTS_ALL main)
set(CPACK_DEBIAN_MAIN_PACKAGE_NAME cutline)
set(CPACK_DEBIAN_MAIN_PACKAGE_SHLIBDEPS ON)       # Depends: from the binaries' shared libraries
set(CPACK_DEBIAN_MAIN_PACKAGE_DEPENDS "adduser")  # postinst creates the system user
set(CPACK_DEBIAN_MAIN_PACKAGE_CONTROL_EXTRA
    ${_deploy}/debian/postinst ${_deploy}/debian/prerm ${_deploy}/debian/postrm
    ${_deploy}/debian/conffiles)
if(TARGET cutline_cuda)
  list(APPEND CPACK_COMPONENTS_ALL cuda)
  set(CPACK_DEBIAN_CUDA_PACKAGE_NAME cutline-backend-cuda)
  set(CPACK_COMPONENT_CUDA_DESCRIPTION
      "CUDA device for cutline-backend (libcutline_cuda.so, loaded when a GPU is present)")
  # dpkg-shlibdeps knows no package for NVIDIA's libraries, so Depends names them by hand: the
  # packages of NVIDIA's CUDA repository that hold the libcudart.so.<major> and
  # libcublas.so.<major> the plugin NEEDs (package_test.sh checks the two agree). Its other
  # libraries (libstdc++, libc) are cutline's, which it depends on at the same version.
  set(_cuda_pkg_ver ${CUDAToolkit_VERSION_MAJOR}-${CUDAToolkit_VERSION_MINOR})
  set(CPACK_DEBIAN_CUDA_PACKAGE_SHLIBDEPS OFF)
  set(CPACK_DEBIAN_CUDA_PACKAGE_DEPENDS
      "cutline (= ${PROJECT_VERSION}), cuda-cudart-${_cuda_pkg_ver}, libcublas-${_cuda_pkg_ver}")
  set(CPACK_DEBIAN_CUDA_PACKAGE_SECTION net)
endif()
include(CPack)

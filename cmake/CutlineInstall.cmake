# Install rules and the Debian package (CPack DEB).
#   cmake --install build [--prefix /usr]   binaries to <prefix>/bin, examples, the Grafana
#                                            dashboard and the Prometheus config to
#                                            <prefix>/share/cutline, systemd units to
#                                            <prefix>/lib/systemd/system, and the service config
#                                            to /etc/cutline (absolute: a service layout, as root)
#   (cd build && cpack -G DEB)               cutline_<version>_<arch>.deb with the same files, a
#                                            `cutline` system user created in postinst, and
#                                            /etc/cutline/* as conffiles
include(GNUInstallDirs)

# Where the units' ExecStart finds the binaries: the package's prefix.
set(CUTLINE_UNIT_BINDIR "/usr/bin" CACHE STRING "Directory of the binaries in the systemd units")

foreach(_bin cutline-gateway cutline-backend cutline)
  if(TARGET ${_bin})
    install(TARGETS ${_bin} RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
  endif()
endforeach()

set(_deploy ${PROJECT_SOURCE_DIR}/deploy)
install(DIRECTORY ${_deploy}/policies/ DESTINATION ${CMAKE_INSTALL_DATADIR}/cutline/policies
        FILES_MATCHING PATTERN "*.yaml")
install(DIRECTORY ${_deploy}/grafana/ DESTINATION ${CMAKE_INSTALL_DATADIR}/cutline/grafana)
install(DIRECTORY ${_deploy}/prometheus/ DESTINATION ${CMAKE_INSTALL_DATADIR}/cutline/prometheus)
install(FILES ${PROJECT_SOURCE_DIR}/README.md
        DESTINATION ${CMAKE_INSTALL_DOCDIR})
install(FILES ${PROJECT_SOURCE_DIR}/policy/README.md DESTINATION ${CMAKE_INSTALL_DOCDIR}
        RENAME policy.md)

foreach(_unit cutline-gateway cutline-backend)
  configure_file(${_deploy}/systemd/${_unit}.service
                 ${CMAKE_CURRENT_BINARY_DIR}/systemd/${_unit}.service @ONLY)
  install(FILES ${CMAKE_CURRENT_BINARY_DIR}/systemd/${_unit}.service
          DESTINATION lib/systemd/system)
endforeach()
install(FILES ${_deploy}/systemd/cutline.yaml ${_deploy}/systemd/backend.env
        DESTINATION /etc/cutline)

set(CPACK_PACKAGE_NAME cutline)
set(CPACK_PACKAGE_VENDOR "Cutline")
set(CPACK_PACKAGE_CONTACT "Cutline maintainers <cutline@localhost>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY
    "Labeling OpenAI-compatible gateway and co-located inference backend")
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
# /etc/cutline (absolute) lands in the package, not on this machine; with DESTDIR, CPack takes
# the prefix from CPACK_INSTALL_PREFIX.
set(CPACK_SET_DESTDIR ON)
set(CPACK_INSTALL_PREFIX /usr)
set(CPACK_STRIP_FILES ON)  # no debug info in the package
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION net)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)       # Depends: from the binaries' shared libraries
set(CPACK_DEBIAN_PACKAGE_DEPENDS "adduser")  # postinst creates the system user
set(CPACK_DEBIAN_PACKAGE_CONTROL_EXTRA
    ${_deploy}/debian/postinst ${_deploy}/debian/prerm ${_deploy}/debian/postrm
    ${_deploy}/debian/conffiles)
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION ON)
include(CPack)

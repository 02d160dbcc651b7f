# Static libraries whose objects hold registrars (static objects that add finalize variants to
# the registry, core/ops/finalize_variants.hpp) must be linked whole: nothing references those
# objects by name, so a plain static link would drop them. moefin_whole_archive(NAME ARCHIVE)
# makes NAME an interface target that links ARCHIVE whole wherever NAME is linked; link NAME,
# never ARCHIVE itself (CMake refuses one library linked both ways in one link).
function(moefin_whole_archive name archive)
  add_library(${name} INTERFACE)
  target_link_libraries(${name} INTERFACE "$<LINK_LIBRARY:WHOLE_ARCHIVE,${archive}>")
endfunction()

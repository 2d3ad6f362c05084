"""From paths on disk to checked texts and back: configuration (`config`), which files are
checked (`paths`), reading and writing them and the run over many (`runner`), notebooks
(`notebook`), `# noqa` suppressions (`noqa`), baselines (`baseline`), and the one seam to the
engine, `Linter` (`linter`): settings, path and text in, findings and fixes out."""

"""The small core every stage uses: settings, providers, plain data, paths, the page file format, CSV and text
helpers, console and progress output, worker processes. Imports nothing from the stages."""

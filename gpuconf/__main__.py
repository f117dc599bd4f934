from gpuconf.cli import main

raise SystemExit(main())

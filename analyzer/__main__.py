from analyzer.cli import main

main()

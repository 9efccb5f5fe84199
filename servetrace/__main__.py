from servetrace.cli import main

main()

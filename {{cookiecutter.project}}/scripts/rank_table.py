{{ 'ranktable' | module_source }}

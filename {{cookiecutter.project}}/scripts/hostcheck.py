{{ 'hostcheck' | module_source }}
